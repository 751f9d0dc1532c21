package web

// Decoding of the API's request bodies: strict, so that a body the API
// does not understand is refused (400) rather than half read.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// The shapes of the request bodies, quoted by the errors that refuse a
// body so that they say what to send.
const (
	idsShape   = `{"ids":[1,2,…]}`
	pruneShape = `{"older_than":"720h"}`
	emptyShape = `no body, or {}`
)

// errEmptyBody is decodeBody's error for a body with nothing in it.
var errEmptyBody = errors.New("the body is empty: send a JSON object")

// decodeBody reads a JSON object of the given shape into v, a pointer to a
// struct: it refuses bodies over maxBody, data after the object, a field
// given twice, and any field that is not exactly one of v's JSON names. encoding/json alone
// matches names without regard to case ({"IDS":[1]} would fill "ids"); here
// a field named otherwise, if only by case, is refused with an error that
// names it and shows the shape.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, shape string) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("the body is over %d bytes", maxBody)
		}
		return fmt.Errorf("reading the body: %w", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return errEmptyBody
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return fmt.Errorf("malformed JSON body: %v; send %s", err, shape)
	}
	// Anything but the end after the object, a stray } or ] included
	// (which dec.More does not count), is refused.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("malformed JSON body: data after the object; send %s", shape)
	}
	if err := checkFieldNames(fields, jsonNames(v), shape); err != nil {
		return err
	}
	// The map kept one value per name; the last of a name given twice
	// would be the one acted on.
	twice, err := fieldGivenTwice(body)
	if err != nil {
		return fmt.Errorf("malformed JSON body: %v; send %s", err, shape)
	}
	if twice != "" {
		return fmt.Errorf("field %q given twice: give each field once; send %s", twice, shape)
	}
	strict := json.NewDecoder(bytes.NewReader(body))
	strict.DisallowUnknownFields()
	if err := strict.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON body: %v; send %s", err, shape)
	}
	return nil
}

// decodeOptionalBody accepts an empty body or an empty JSON object.
func decodeOptionalBody(w http.ResponseWriter, r *http.Request) error {
	var v struct{}
	if err := decodeBody(w, r, &v, emptyShape); err != nil && !errors.Is(err, errEmptyBody) {
		return err
	}
	return nil
}

// fieldGivenTwice returns the first name the JSON object in body gives
// twice, or "" when it gives each once (or body is null).
func fieldGivenTwice(body []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return "", err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		name, ok := tok.(string)
		if !ok {
			return "", fmt.Errorf("a field name is %v, not a string", tok)
		}
		if seen[name] {
			return name, nil
		}
		seen[name] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return "", err
		}
	}
	return "", nil
}

// checkFieldNames refuses the first field (in sorted order, so that the
// error is always the same) whose name is not exactly one of names.
func checkFieldNames(fields map[string]json.RawMessage, names []string, shape string) error {
	got := make([]string, 0, len(fields))
	for f := range fields {
		got = append(got, f)
	}
	sort.Strings(got)
	for _, f := range got {
		if slices.Contains(names, f) {
			continue
		}
		for _, n := range names {
			if strings.EqualFold(f, n) {
				return fmt.Errorf("unknown field %q: field names are case-sensitive, did you mean %q? send %s", f, n, shape)
			}
		}
		return fmt.Errorf("unknown field %q: send %s", f, shape)
	}
	return nil
}

// jsonNames are the JSON names of the fields of the struct v points to.
func jsonNames(v any) []string {
	t := reflect.TypeOf(v).Elem()
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}
