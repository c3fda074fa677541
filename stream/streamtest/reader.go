package streamtest

import (
	"bufio"
	"errors"
	"io"
	"strings"
)

// Frame is one SSE frame: the lines up to a blank line. Fields a frame did
// not carry are empty; HasID tells an absent id from an empty one.
type Frame struct {
	ID       string
	HasID    bool
	Event    string
	Data     string // data lines joined with "\n"
	HasData  bool
	Retry    string
	Comments []string
}

// IsComment reports whether the frame holds only comments.
func (f Frame) IsComment() bool {
	return !f.HasID && !f.HasData && f.Event == "" && f.Retry == "" && len(f.Comments) > 0
}

// Reader parses an SSE stream (WHATWG "event stream interpretation") frame
// by frame, keeping comments, which a browser hides.
type Reader struct {
	br *bufio.Reader
}

// NewReader reads frames from r.
func NewReader(r io.Reader) *Reader { return &Reader{br: bufio.NewReaderSize(r, 64<<10)} }

// ErrLineTooLong is returned for a line over 16 MiB.
var ErrLineTooLong = errors.New("streamtest: SSE line too long")

// Next returns the next frame. At the end of the stream it returns io.EOF
// (a partial last frame is dropped, as a browser drops it).
func (r *Reader) Next() (Frame, error) {
	var f Frame
	var data []string
	started := false
	for {
		line, err := r.readLine()
		if err != nil {
			return Frame{}, err
		}
		if line == "" {
			if !started {
				continue
			}
			f.Data = strings.Join(data, "\n")
			return f, nil
		}
		started = true
		if c, ok := strings.CutPrefix(line, ":"); ok {
			f.Comments = append(f.Comments, strings.TrimPrefix(c, " "))
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "id":
			f.ID, f.HasID = value, true
		case "event":
			f.Event = value
		case "data":
			data = append(data, value)
			f.HasData = true
		case "retry":
			f.Retry = value
		}
	}
}

func (r *Reader) readLine() (string, error) {
	var sb strings.Builder
	for {
		chunk, isPrefix, err := r.br.ReadLine()
		if err != nil {
			return "", err
		}
		sb.Write(chunk)
		if sb.Len() > 16<<20 {
			return "", ErrLineTooLong
		}
		if !isPrefix {
			return sb.String(), nil
		}
	}
}
