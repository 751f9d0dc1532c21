package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/jobqueue/jobqueue/queue"
)

// readPayload is the payload that enqueue's --payload value arg gives, as
// curl's --data does: "-" (or "@-") reads it from stdin, "@FILE" from the
// file FILE, anything else is the JSON itself. No JSON text starts with '@'
// or is a lone '-' (a JSON string starts with its quote, a number with a
// digit or a '-' followed by one), so a literal is never mistaken for the
// others. A payload that cannot be read, is empty (but for spaces), is not
// UTF-8 or is not one JSON value is a usage error that says where it came
// from, and so is one larger than queue.MaxPayloadSize, of which no more
// than a byte past the bound is read (--payload @/dev/zero ends); a read
// that ctx's end (a stop signal) cuts short is ctx's error.
func (a *app) readPayload(ctx context.Context, arg string) (json.RawMessage, error) {
	var (
		data []byte
		from string // where the payload came from, as the errors say it
	)
	switch {
	case arg == "-" || arg == "@-":
		b, err := readAll(ctx, a.in)
		if ctx.Err() != nil {
			return nil, err // a signal: not a usage error
		}
		if errors.Is(err, errTooLarge) {
			return nil, tooLarge(arg, "stdin")
		}
		if err != nil {
			return nil, usagef("--payload %s: cannot read the payload from stdin: %v", arg, err)
		}
		data, from = b, "stdin"
	case strings.HasPrefix(arg, "@"):
		path := arg[1:]
		if path == "" {
			return nil, usagef("--payload @ names no file; write --payload @FILE to read the payload from FILE, or --payload - to read it from stdin")
		}
		b, err := readFile(ctx, path)
		if ctx.Err() != nil {
			return nil, err // a signal: not a usage error
		}
		if errors.Is(err, errTooLarge) {
			return nil, tooLarge(arg, "the file "+tableCell(path))
		}
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is said once, below
			}
			hint := "give the path of a readable file that holds the JSON payload"
			if errors.Is(err, fs.ErrNotExist) {
				hint += fmt.Sprintf(`; a payload that is a JSON string starting with @ keeps its quotes: --payload '"%s"'`, tableCell(arg))
			}
			return nil, usagef("--payload %s: cannot read the file %s: %v; %s", tableCell(arg), tableCell(path), err, hint)
		}
		data, from = b, "the file "+tableCell(path)
	default:
		if !utf8.ValidString(arg) {
			return nil, usagef("--payload %s is not valid UTF-8; give the JSON in UTF-8", tableCell(shorten(arg, 40)))
		}
		if !json.Valid([]byte(arg)) {
			return nil, usagef(`--payload %q is not valid JSON; give a JSON value in single quotes, e.g. --payload '{"to":"a@example.com"}', or leave it out for {} (--payload @FILE reads it from a file, --payload - from stdin)`, shorten(arg, 40))
		}
		return json.RawMessage(arg), nil
	}
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		return nil, usagef("--payload %s: %s is empty; give it the job's JSON payload, or leave --payload out for {}", tableCell(arg), from)
	case bytes.HasPrefix(data, []byte("\xef\xbb\xbf")):
		return nil, usagef("--payload %s: %s starts with a byte order mark, which JSON does not allow; save it without one", tableCell(arg), from)
	case !utf8.Valid(data):
		return nil, usagef("--payload %s: %s is not valid UTF-8, which JSON must be; save it as UTF-8", tableCell(arg), from)
	}
	var syntax *json.SyntaxError
	if err := json.Unmarshal(data, new(json.RawMessage)); errors.As(err, &syntax) {
		line, col := position(data, syntax.Offset)
		return nil, usagef("--payload %s: %s does not hold valid JSON (%v, at line %d, column %d); it must hold one JSON value", tableCell(arg), from, err, line, col)
	} else if err != nil {
		return nil, usagef("--payload %s: %s does not hold valid JSON (%v); it must hold one JSON value", tableCell(arg), from, err)
	}
	return json.RawMessage(data), nil
}

// errTooLarge is readAll's error for an input larger than
// queue.MaxPayloadSize.
var errTooLarge = fmt.Errorf("larger than %d bytes", queue.MaxPayloadSize)

// tooLarge is the usage error for the payload arg gives, read from from,
// that is larger than queue.MaxPayloadSize.
func tooLarge(arg, from string) error {
	return usagef("--payload %s: %s is larger than %d bytes (%d MiB), the largest payload every engine stores; keep large data elsewhere (a file store, another table) and put its address in the payload", tableCell(arg), from, queue.MaxPayloadSize, queue.MaxPayloadSize>>20)
}

// readAll reads r to its end, at most queue.MaxPayloadSize bytes (a longer
// r is errTooLarge, read one byte past the bound), or gives up with ctx's error when ctx ends
// first (a stop signal): a read of a terminal, or of a pipe whose writer
// never closes it, would otherwise hold the command past the signal. The
// abandoned read ends with the process.
func readAll(ctx context.Context, r io.Reader) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, queue.MaxPayloadSize+1))
		if err == nil && len(b) > queue.MaxPayloadSize {
			b, err = nil, errTooLarge
		}
		done <- read{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readFile is os.ReadFile through readAll, so that a stop signal ends a
// read that waits (a named pipe, /dev/stdin).
func readFile(ctx context.Context, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	b, err := readAll(ctx, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return b, err
}

// position is the line and column (from 1, in bytes) of the byte at
// offset in data; json.SyntaxError's Offset counts the bytes read before
// the error, so the byte at offset-1 is the one that failed.
func position(data []byte, offset int64) (line, col int) {
	if offset > 0 {
		offset--
	}
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = 1 + len(before) - (bytes.LastIndexByte(before, '\n') + 1)
	return line, col
}
