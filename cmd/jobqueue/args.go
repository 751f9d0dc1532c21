package main

import "github.com/spf13/cobra"

// flagsOnly is the Args of every command that takes flags only: it refuses
// any argument with a usage error naming the first one and what to do.
// (cobra.NoArgs called a stray argument an unknown command, which sent the
// user looking for a command when a value lost its flag or its quotes.)
func flagsOnly(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return usagef("unexpected argument %q: '%s' takes no arguments, only flags; give each value right after its flag, and quote a value that has spaces", args[0], cmd.CommandPath())
}

// oneJobID is the argument check of a command that takes exactly one job
// id (show): a usage error that says so when it is missing or followed by
// another argument.
func oneJobID(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return usagef("'%s' needs a job id, e.g. '%s 42'", cmd.CommandPath(), cmd.CommandPath())
	case len(args) > 1:
		return usagef("unexpected argument %q: '%s' takes one job id", args[1], cmd.CommandPath())
	}
	return nil
}

// someJobIDs is the argument check of a command that takes one or more job
// ids (retry, cancel, delete): a usage error that says so when none is given.
func someJobIDs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return usagef("'%s' needs at least one job id, e.g. '%s 42 43'", cmd.CommandPath(), cmd.CommandPath())
	}
	return nil
}
