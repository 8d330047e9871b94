package sketch

import (
	"errors"
	"fmt"
)

// Errors that the functions of this package wrap, so that callers can tell
// the three kinds apart with errors.Is; the message names what is wrong.
var (
	// ErrArgument is wrapped by constructors given an invalid argument.
	ErrArgument = errors.New("sketch: invalid argument")
	// ErrMismatch is wrapped by Merge when the two sketches cannot be merged.
	ErrMismatch = errors.New("sketch: cannot merge")
	// ErrCorrupt is wrapped by UnmarshalBinary for truncated, garbage or
	// unsupported input.
	ErrCorrupt = errors.New("sketch: cannot unmarshal")
)

// Every encoding starts with a three-letter magic naming the type and a
// format version byte, so a pane stored today can be read (or refused with a
// clear error) by a later release.
const (
	headerLen     = 4
	formatVersion = 1
)

func appendHeader(b []byte, magic string) []byte {
	return append(append(b, magic...), formatVersion)
}

// checkHeader validates the magic and version of data written by appendHeader
// and returns the rest.
func checkHeader(data []byte, magic, what string) ([]byte, error) {
	if len(data) < headerLen {
		return nil, fmt.Errorf("%w: %s: truncated: %d bytes, the header alone needs %d", ErrCorrupt, what, len(data), headerLen)
	}
	if string(data[:3]) != magic {
		return nil, fmt.Errorf("%w: %s: magic %q, want %q", ErrCorrupt, what, data[:3], magic)
	}
	if data[3] != formatVersion {
		return nil, fmt.Errorf("%w: %s: format version %d, this build reads %d", ErrCorrupt, what, data[3], formatVersion)
	}
	return data[headerLen:], nil
}
