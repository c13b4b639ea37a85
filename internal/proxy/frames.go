package proxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// maxFrame bounds one watch event; the API server's own limit for a
// protobuf frame is far below this, and a larger length means a corrupt
// stream rather than a big object.
const maxFrame = 64 << 20

// FrameReader splits a watch response body into whole events, returning
// each event's exact bytes, so that delayed frames are forwarded unchanged.
type FrameReader interface {
	// Next returns the next frame; io.EOF at a clean end of stream.
	Next() ([]byte, error)
}

// NewJSONFrameReader splits a JSON watch stream: a sequence of JSON objects,
// each with the whitespace (newline) that follows it.
func NewJSONFrameReader(r io.Reader) FrameReader { return &jsonFrames{r: bufio.NewReader(r)} }

// NewProtobufFrameReader splits a protobuf watch stream: each frame is a
// 4-byte big-endian length followed by that many bytes
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf's length-delimited
// framer).
func NewProtobufFrameReader(r io.Reader) FrameReader { return &protoFrames{r: bufio.NewReader(r)} }

type protoFrames struct{ r *bufio.Reader }

func (p *protoFrames) Next() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(p.r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("protobuf watch frame: truncated length: %w", err)
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, fmt.Errorf("protobuf watch frame: length %d exceeds %d", n, maxFrame)
	}
	frame := make([]byte, 4+int(n))
	copy(frame, hdr[:])
	if _, err := io.ReadFull(p.r, frame[4:]); err != nil {
		return nil, fmt.Errorf("protobuf watch frame: truncated body (%d bytes): %w", n, err)
	}
	return frame, nil
}

type jsonFrames struct{ r *bufio.Reader }

// Next scans one JSON value byte by byte, tracking strings and nesting, and
// returns it with the whitespace after it. Anything but an object or array
// at the top level is an error: watch events are objects.
func (j *jsonFrames) Next() ([]byte, error) {
	var frame []byte
	// Leading whitespace belongs to the previous frame's tail; at the start
	// of a stream it is kept with this frame so nothing is dropped.
	for {
		b, err := j.r.ReadByte()
		if err != nil {
			if err == io.EOF && len(frame) > 0 {
				return frame, nil // trailing whitespace only
			}
			return nil, err
		}
		frame = append(frame, b)
		if isSpace(b) {
			continue
		}
		if b != '{' && b != '[' {
			return nil, fmt.Errorf("JSON watch stream: unexpected %q at the start of an event", b)
		}
		break
	}
	depth, inString, escaped := 1, false, false
	for depth > 0 {
		b, err := j.r.ReadByte()
		if err != nil {
			if err == io.EOF {
				return nil, fmt.Errorf("JSON watch stream: truncated event (%d bytes): %w", len(frame), io.ErrUnexpectedEOF)
			}
			return nil, err
		}
		frame = append(frame, b)
		if len(frame) > maxFrame {
			return nil, fmt.Errorf("JSON watch stream: event exceeds %d bytes", maxFrame)
		}
		switch {
		case inString && escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case inString && b == '"':
			inString = false
		case inString:
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			depth++
		case b == '}' || b == ']':
			depth--
		}
	}
	// Keep the whitespace that follows (the encoder's newline) with this
	// frame, as far as it has arrived: waiting for more would hold the
	// event until the next one comes.
	for j.r.Buffered() > 0 {
		bs, err := j.r.Peek(1)
		if err != nil || !isSpace(bs[0]) {
			return frame, nil
		}
		b, _ := j.r.ReadByte()
		frame = append(frame, b)
	}
	return frame, nil
}

func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\r' || b == '\t' }
