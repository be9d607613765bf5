package p2p

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes v, JSON-encoded, as one frame of at most max bytes.
func WriteJSON(w io.Writer, v any, max int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return WriteFrame(w, b, max)
}

// ReadJSON reads one frame of at most max bytes (checked, and accounted
// to the stream's memory budget, by ReadFrame before anything is read)
// and decodes it into v as DecodeJSON does. The reservation is held until
// the frame is decoded.
func ReadJSON(r io.Reader, max int, v any) error {
	b, release, err := readFrame(r, max)
	if err != nil {
		return err
	}
	defer release()
	return DecodeJSON(b, v)
}

// DecodeJSON decodes one JSON message strictly: unknown fields and
// trailing data are errors.
func DecodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed message: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("malformed message: trailing data")
	}
	return nil
}
