package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

func readAll(t testing.TB, fr FrameReader) ([][]byte, error) {
	var frames [][]byte
	for {
		f, err := fr.Next()
		if err == io.EOF {
			return frames, nil
		}
		if err != nil {
			return frames, err
		}
		frames = append(frames, f)
	}
}

func TestJSONFrames(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr bool
	}{
		{"two events with newlines", "{\"type\":\"ADDED\"}\n{\"type\":\"MODIFIED\"}\n", []string{"{\"type\":\"ADDED\"}\n", "{\"type\":\"MODIFIED\"}\n"}, false},
		{"braces and quotes inside strings", `{"a":"}{\"]"}` + "\n", []string{`{"a":"}{\"]"}` + "\n"}, false},
		{"nested objects", `{"o":{"x":[1,{"y":2}]}}{"z":1}`, []string{`{"o":{"x":[1,{"y":2}]}}`, `{"z":1}`}, false},
		{"truncated event", `{"type":"ADD`, nil, true},
		{"garbage", `x`, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			frames, err := readAll(t, NewJSONFrameReader(strings.NewReader(tc.in)))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if tc.wantErr {
				return
			}
			var got []string
			for _, f := range frames {
				got = append(got, string(f))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("frames %q, want %q", got, tc.want)
			}
		})
	}
}

func protoFrame(payload string) []byte {
	b := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(b, uint32(len(payload)))
	copy(b[4:], payload)
	return b
}

func TestProtobufFrames(t *testing.T) {
	in := append(protoFrame("k8s\x00one"), protoFrame("")...)
	in = append(in, protoFrame("three")...)
	frames, err := readAll(t, NewProtobufFrameReader(bytes.NewReader(in)))
	if err != nil || len(frames) != 3 || !bytes.Equal(bytes.Join(frames, nil), in) {
		t.Fatalf("frames %q, %v", frames, err)
	}
	_, err = readAll(t, NewProtobufFrameReader(bytes.NewReader(in[:len(in)-2])))
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated stream: %v", err)
	}
	huge := []byte{0xff, 0xff, 0xff, 0xff}
	if _, err := readAll(t, NewProtobufFrameReader(bytes.NewReader(huge))); err == nil {
		t.Error("absurd length accepted")
	}
}

// The frame readers must never panic, and whatever frames they return must
// be the input's bytes in order, without loss or change.
func FuzzJSONFrames(f *testing.F) {
	f.Add([]byte("{\"type\":\"ADDED\",\"object\":{\"a\":\"}\\\"\"}}\n{\"type\":\"BOOKMARK\"}\n"))
	f.Add([]byte("[1,2]{}"))
	f.Add([]byte("{\"a\":\"\\\\\"}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		frames, err := readAll(t, NewJSONFrameReader(bytes.NewReader(in)))
		joined := bytes.Join(frames, nil)
		if !bytes.HasPrefix(in, joined) {
			t.Fatalf("frames are not a prefix of the input:\n%q\n%q", joined, in)
		}
		if err == nil && !bytes.Equal(joined, in) {
			t.Fatalf("clean end but bytes lost:\n%q\n%q", joined, in)
		}
	})
}

func FuzzProtobufFrames(f *testing.F) {
	f.Add(append(protoFrame("abc"), protoFrame("de")...))
	f.Add([]byte{0, 0, 0, 9, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		frames, err := readAll(t, NewProtobufFrameReader(bytes.NewReader(in)))
		joined := bytes.Join(frames, nil)
		if !bytes.HasPrefix(in, joined) {
			t.Fatalf("frames are not a prefix of the input")
		}
		if err == nil && !bytes.Equal(joined, in) {
			t.Fatalf("clean end but bytes lost")
		}
		for _, fr := range frames {
			if int(binary.BigEndian.Uint32(fr)) != len(fr)-4 {
				t.Fatalf("frame length header does not match its body")
			}
		}
	})
}
