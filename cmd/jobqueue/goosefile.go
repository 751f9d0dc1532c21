package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/spf13/cobra"

	"github.com/jobqueue/jobqueue/internal/engine"
	"github.com/jobqueue/jobqueue/migrations"
)

// gooseVersionFormat is goose's timestamp form of a migration version.
const gooseVersionFormat = "20060102150405"

func (a *app) gooseFileCommand() *cobra.Command {
	var engineName, version, dir string
	cmd := &cobra.Command{
		Use:   "goose-file --engine postgres|mysql|sqlite [--table NAME] [--version N] [--dir DIR]",
		Short: "Print (or write into DIR) a goose SQL migration that creates what install creates",
		Long: `goose-file prints a goose SQL migration that creates the table named by --table
for --engine exactly as 'jobqueue install' does (the version 2 table, its four
indexes and its side tables); its Down drops them. Commit it next to your own
migrations and let 'goose up' create the table. No database is opened.

With --dir DIR it writes the file into DIR as <version>_jobqueue_<table>.sql
instead, refusing to overwrite a file or to reuse a version DIR already has.
--version is the goose version (default: the current UTC time, YYYYMMDDhhmmss).

The file does not convert a version 1 table: run 'jobqueue migrate' once for
that (or migrations.GooseMigrations in a goose binary of your own).`,
		Args: flagsOnly,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			k, err := engine.ParseKind(engineName)
			if err != nil {
				return usagef("--engine %q: use postgres, mysql (also for MariaDB) or sqlite", engineName)
			}
			t, err := engine.ParseTable(k, a.table)
			if err != nil {
				return &usageError{err: err}
			}
			if !cmd.Flags().Changed("version") {
				version = time.Now().UTC().Format(gooseVersionFormat)
			}
			if err := checkGooseVersion(version); err != nil {
				return err
			}
			text, err := migrations.GooseSQL(string(k), t.Name)
			if err != nil {
				return err
			}
			if dir == "" {
				_, err := fmt.Fprint(a.out, text)
				return err
			}
			path, err := writeGooseFile(dir, version+"_jobqueue_"+t.Name+".sql", text)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.out, path)
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&engineName, "engine", "", "postgres, mysql (also for MariaDB) or sqlite (required)")
	f.StringVar(&version, "version", "", "goose version of the migration, a positive integer (default: now in UTC, YYYYMMDDhhmmss)")
	f.StringVar(&dir, "dir", "", "write the file into this directory instead of printing it")
	cmd.MarkFlagRequired("engine")
	return cmd
}

// checkGooseVersion checks --version: digits only, a positive number that
// fits goose's int64.
func checkGooseVersion(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || strings.TrimLeft(v, "0123456789") != "" {
		return usagef("--version %q: a goose version is a positive whole number, such as 20260101120000", v)
	}
	return nil
}

// writeGooseFile writes text into dir as a new file called name and
// returns its path. It refuses, writing nothing, a dir that is missing or
// not a directory, an existing file, and a version (the digits before the
// first "_") that another file in dir already has, since goose would stop
// on the duplicate.
func writeGooseFile(dir, name, text string) (string, error) {
	info, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("--dir %s does not exist; create it first (it is the folder goose reads its migrations from)", dir)
		}
		return "", fmt.Errorf("--dir %s: %w", dir, err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("--dir %s is not a directory; give the folder goose reads its migrations from", dir)
	}
	path := filepath.Join(dir, name)
	if err := checkVersionFree(dir, name); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("%s exists already; remove it or choose another --version", path)
		}
		return "", fmt.Errorf("cannot write the migration: %w; check the permissions of --dir", err)
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("write %s: %w (nothing was left behind)", path, err)
	}
	return path, nil
}

// checkVersionFree fails when another migration in dir has the version of
// name: a file goose reads as one (.sql, or .go but not _test.go), whose
// version goose.NumericComponent reads (the number before the first "_";
// 00042 and 42 are the same version). Other files are not migrations.
func checkVersionFree(dir, name string) error {
	want, _, _ := strings.Cut(name, "_")
	wantN, err := strconv.ParseInt(want, 10, 64)
	if err != nil {
		return fmt.Errorf("migration file name %s has no version", name)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("--dir %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == name || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		if n, err := goose.NumericComponent(e.Name()); err == nil && n == wantN {
			return fmt.Errorf("%s already has migration %s with version %s; choose another --version", dir, e.Name(), want)
		}
	}
	return nil
}
