package main

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseDuration: a duration flag is either refused as a usage error
// that names the flag, or read as a non-negative duration: N days (a
// multiple of 24 hours, without overflow) for "Nd", else what
// time.ParseDuration reads.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30d", "0d", "-1d", "+2d", "1.5d", "d", "7dd", "90s", "15m", "2h30m", "-5s", "0", "",
		"106751d", "106752d", "9223372036854775807d", "2562047h47m16.854775807s", "2562047h47m16.854775808s", "1e3s", "１d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseDuration("--older-than", s)
		if err != nil {
			var u *usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), "--older-than") {
				t.Fatalf("%q: error %v is not a usage error naming the flag", s, err)
			}
			if days, ok := strings.CutSuffix(s, "d"); ok {
				if n, perr := strconv.ParseInt(days, 10, 64); perr == nil && n >= 0 && n <= math.MaxInt64/int64(24*time.Hour) {
					t.Fatalf("%q: refused (%v), but %d days fit a duration", s, err, n)
				}
			} else if std, perr := time.ParseDuration(s); perr == nil && std >= 0 {
				t.Fatalf("%q: refused (%v), but time.ParseDuration reads %v", s, err, std)
			}
			return
		}
		if d < 0 {
			t.Fatalf("%q: negative duration %v", s, d)
		}
		if days, ok := strings.CutSuffix(s, "d"); ok {
			n, perr := strconv.ParseInt(days, 10, 64)
			if perr != nil || d != time.Duration(n)*24*time.Hour || d%(24*time.Hour) != 0 {
				t.Fatalf("%q: read as %v", s, d)
			}
			return
		}
		if std, perr := time.ParseDuration(s); perr != nil || std != d {
			t.Fatalf("%q: read as %v; time.ParseDuration says %v, %v", s, d, std, perr)
		}
	})
}
