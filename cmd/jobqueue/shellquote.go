package main

import "strings"

// shellQuote is s as one word of a POSIX shell command line: as it is when
// every character is one the shell leaves alone, else in single quotes (a
// single quote inside ends the quoted part, is escaped with a backslash, and
// the quoted part starts again), so that a command printed for the user to
// paste runs as printed.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
