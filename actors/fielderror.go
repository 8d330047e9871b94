package actors

import "fmt"

// FieldError is a setting out of range, naming the Go field it concerns
// (Config.Ackers is "Ackers"), so that a command line or a config file can
// name its own flag or key for it without reading the message.
type FieldError struct {
	Field string // the field, as Go spells it: "Ackers", "MaxPending"
	Value any    // the value given
	Want  string // what would do: "0..4096"
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s = %v, want %s", e.Field, e.Value, e.Want) }

// fieldError is a FieldError for field, whose value v is not want.
func fieldError(field string, v any, want string, args ...any) error {
	return &FieldError{Field: field, Value: v, Want: fmt.Sprintf(want, args...)}
}
