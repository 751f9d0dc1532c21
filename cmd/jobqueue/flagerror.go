package main

import (
	"errors"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagError is the usage error (exit status 2) of a flag that cobra could
// not parse. A value a number or true/false flag does not take is said in
// the flag's words, with an example, rather than in strconv's ("invalid
// argument "ten" for "--limit" flag: strconv.ParseInt: parsing "ten":
// invalid syntax"); other errors (an unknown flag, a missing value) are kept
// as they are.
func flagError(_ *cobra.Command, err error) error {
	var bad *pflag.InvalidValueError
	if !errors.As(err, &bad) {
		return &usageError{err: err}
	}
	f, v := bad.GetFlag(), bad.GetValue()
	switch {
	case strings.HasPrefix(f.Value.Type(), "int") || strings.HasPrefix(f.Value.Type(), "uint"):
		if errors.Is(err, strconv.ErrRange) {
			return usagef("--%s %s is too large; give a smaller whole number", f.Name, v)
		}
		example := f.DefValue
		if example == "0" { // not a value most such flags take
			example = "10"
		}
		return usagef("--%s %q is not a whole number; give digits, e.g. --%s %s", f.Name, v, f.Name, example)
	case f.Value.Type() == "bool":
		return usagef("--%s=%q: write --%s alone to turn it on (or --%s=true, --%s=false)", f.Name, v, f.Name, f.Name, f.Name)
	}
	return &usageError{err: err}
}
