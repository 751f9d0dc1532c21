package duration

import (
	"errors"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		want    time.Duration
		wantErr error
	}{
		{"0s", 0, nil},
		{"90s", 90 * time.Second, nil},
		{"1h30m", 90 * time.Minute, nil},
		{"7d", 7 * 24 * time.Hour, nil},
		{"0d", 0, nil},
		{"106751d", 106751 * 24 * time.Hour, nil},
		{"106752d", 0, ErrTooLong},
		{"-3d", 0, ErrNegative},
		{"-1h", 0, ErrNegative},
		{"", 0, ErrSyntax},
		{"d", 0, ErrSyntax},
		{"1.5d", 0, ErrSyntax},
		{"a month", 0, ErrSyntax},
		// Past time.Duration's range, in whatever unit: too long (or
		// negative), not "not a duration" as these were.
		{"99999999999d", 0, ErrTooLong},
		{"99999999999999999999d", 0, ErrTooLong},
		{"-99999999999d", 0, ErrNegative},
		{"-200000d", 0, ErrNegative},
		{"2562047h", 2562047 * time.Hour, nil},
		{"3000000h", 0, ErrTooLong},
		{"2562047h47m16.854775808s", 0, ErrTooLong},
		{"-3000000h", 0, ErrNegative},
		{"1e3s", 0, ErrSyntax},
		{"5", 0, ErrSyntax},
		{"0", 0, nil},
		{"+2d", 2 * 24 * time.Hour, nil},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := Parse(c.in)
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) || got != c.want {
				t.Errorf("Parse(%q) = %v, %v; want %v, %v", c.in, got, err, c.want, c.wantErr)
			}
		})
	}
}
