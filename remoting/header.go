package remoting

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors of header field access; they come wrapped in a *FieldError that
// names the field.
var (
	// ErrMissingField is returned when a required ext field is absent.
	ErrMissingField = errors.New("missing")
	// ErrBadField is returned when an ext field does not parse as its type.
	ErrBadField = errors.New("bad value")
)

// FieldError names the ext field a request header lacks or has wrong. Its
// text is meant for a response remark: `header field "queueId": bad value
// "x": want a 32-bit integer`.
type FieldError struct {
	// Field is the ext field key.
	Field string
	// Value is the text found, empty when the field is missing.
	Value string
	// Err is ErrMissingField or ErrBadField.
	Err error
	// Want describes the expected type for ErrBadField.
	Want string
}

// Error implements error.
func (e *FieldError) Error() string {
	if errors.Is(e.Err, ErrMissingField) {
		return fmt.Sprintf("header field %q: missing", e.Field)
	}
	return fmt.Sprintf("header field %q: bad value %q: want %s", e.Field, e.Value, e.Want)
}

// Unwrap returns ErrMissingField or ErrBadField.
func (e *FieldError) Unwrap() error { return e.Err }

// Header gives typed access to a command's ext fields, following Java's
// rules: integers are decimal with an optional sign, booleans are "true"
// (any case) or anything else for false. Header(nil) reads as empty.
type Header map[string]string

// Has reports whether key is present.
func (h Header) Has(key string) bool {
	_, ok := h[key]
	return ok
}

// String returns a required string field; an empty value counts as present.
func (h Header) String(key string) (string, error) {
	v, ok := h[key]
	if !ok {
		return "", &FieldError{Field: key, Err: ErrMissingField}
	}
	return v, nil
}

// OptString returns an optional string field, or def when absent.
func (h Header) OptString(key, def string) string {
	if v, ok := h[key]; ok {
		return v
	}
	return def
}

// Int32 returns a required 32-bit integer field.
func (h Header) Int32(key string) (int32, error) {
	v, ok := h[key]
	if !ok {
		return 0, &FieldError{Field: key, Err: ErrMissingField}
	}
	return parseInt32(key, v)
}

// OptInt32 returns an optional 32-bit integer field, or def when absent or
// empty. A present value that does not parse is an error.
func (h Header) OptInt32(key string, def int32) (int32, error) {
	v, ok := h[key]
	if !ok || v == "" {
		return def, nil
	}
	return parseInt32(key, v)
}

// Int64 returns a required 64-bit integer field.
func (h Header) Int64(key string) (int64, error) {
	v, ok := h[key]
	if !ok {
		return 0, &FieldError{Field: key, Err: ErrMissingField}
	}
	return parseInt64(key, v)
}

// OptInt64 returns an optional 64-bit integer field, or def when absent or
// empty. A present value that does not parse is an error.
func (h Header) OptInt64(key string, def int64) (int64, error) {
	v, ok := h[key]
	if !ok || v == "" {
		return def, nil
	}
	return parseInt64(key, v)
}

// Bool returns a required boolean field: true for "true" in any case,
// false for any other text (Java's Boolean.parseBoolean).
func (h Header) Bool(key string) (bool, error) {
	v, ok := h[key]
	if !ok {
		return false, &FieldError{Field: key, Err: ErrMissingField}
	}
	return strings.EqualFold(v, "true"), nil
}

// OptBool returns an optional boolean field, or def when absent or empty.
func (h Header) OptBool(key string, def bool) bool {
	v, ok := h[key]
	if !ok || v == "" {
		return def
	}
	return strings.EqualFold(v, "true")
}

// Set stores a string field. h must not be nil.
func (h Header) Set(key, value string) { h[key] = value }

// SetInt32 stores a 32-bit integer field in decimal. h must not be nil.
func (h Header) SetInt32(key string, v int32) { h[key] = strconv.FormatInt(int64(v), 10) }

// SetInt64 stores a 64-bit integer field in decimal. h must not be nil.
func (h Header) SetInt64(key string, v int64) { h[key] = strconv.FormatInt(v, 10) }

// SetBool stores a boolean field as "true" or "false". h must not be nil.
func (h Header) SetBool(key string, v bool) { h[key] = strconv.FormatBool(v) }

func parseInt32(key, v string) (int32, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0, &FieldError{Field: key, Value: v, Err: ErrBadField, Want: "a 32-bit integer"}
	}
	return int32(n), nil
}

func parseInt64(key, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, &FieldError{Field: key, Value: v, Err: ErrBadField, Want: "a 64-bit integer"}
	}
	return n, nil
}

// Reader returns a HeaderReader over h, for reading many fields and
// checking one error at the end.
func (h Header) Reader() *HeaderReader { return &HeaderReader{h: h} }

// HeaderReader reads fields of a Header and keeps the first error; after an
// error every getter returns the zero value. Typical use:
//
//	r := remoting.Header(req.ExtFields).Reader()
//	topic := r.String("topic")
//	queueID := r.Int32("queueId")
//	if err := r.Err(); err != nil { /* answer with err's text */ }
type HeaderReader struct {
	h   Header
	err error
}

// Err returns the first error met, a *FieldError, or nil.
func (r *HeaderReader) Err() error { return r.err }

// String reads a required string field.
func (r *HeaderReader) String(key string) string {
	if r.err != nil {
		return ""
	}
	v, err := r.h.String(key)
	r.err = err
	return v
}

// OptString reads an optional string field.
func (r *HeaderReader) OptString(key, def string) string {
	if r.err != nil {
		return ""
	}
	return r.h.OptString(key, def)
}

// Int32 reads a required 32-bit integer field.
func (r *HeaderReader) Int32(key string) int32 {
	if r.err != nil {
		return 0
	}
	v, err := r.h.Int32(key)
	r.err = err
	return v
}

// OptInt32 reads an optional 32-bit integer field.
func (r *HeaderReader) OptInt32(key string, def int32) int32 {
	if r.err != nil {
		return 0
	}
	v, err := r.h.OptInt32(key, def)
	r.err = err
	return v
}

// Int64 reads a required 64-bit integer field.
func (r *HeaderReader) Int64(key string) int64 {
	if r.err != nil {
		return 0
	}
	v, err := r.h.Int64(key)
	r.err = err
	return v
}

// OptInt64 reads an optional 64-bit integer field.
func (r *HeaderReader) OptInt64(key string, def int64) int64 {
	if r.err != nil {
		return 0
	}
	v, err := r.h.OptInt64(key, def)
	r.err = err
	return v
}

// Bool reads a required boolean field.
func (r *HeaderReader) Bool(key string) bool {
	if r.err != nil {
		return false
	}
	v, err := r.h.Bool(key)
	r.err = err
	return v
}

// OptBool reads an optional boolean field.
func (r *HeaderReader) OptBool(key string, def bool) bool {
	if r.err != nil {
		return false
	}
	return r.h.OptBool(key, def)
}
