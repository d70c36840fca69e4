// Package safecsv writes CSV that is safe to open in a spreadsheet: the
// console's exports (records, comparison differences) and the comparison
// engine's CSV all go through it.
package safecsv

import (
	"bufio"
	"io"
	"strings"
)

// CSV exports are opened in spreadsheets, which run a cell starting with
// "=", "+", "-" or "@" (and, in some, a tab or carriage return) as a
// formula: a record value "=HYPERLINK(...)" or "=cmd|' /C calc'!A0" becomes
// code on the reader's machine (CSV or formula injection). As OWASP
// recommends, such a cell is written with a leading single quote, which
// spreadsheets show as text, and every cell is quoted, so a separator of
// another locale (";") inside a cell cannot start a new cell. A plain
// number ("-12", "+3.5") is left alone: it is no formula.

// Cell is s made safe to open in a spreadsheet (see above), before
// quoting.
func Cell(s string) string {
	if s == "" || plainNumber(s) {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

func plainNumber(s string) bool {
	i := 0
	if s[0] == '-' || s[0] == '+' {
		i = 1
	}
	digits, dot := 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return digits > 0
}

// Writer writes RFC 4180 CSV with every cell quoted and passed through
// Cell. encoding/csv reads it back.
type Writer struct {
	w   *bufio.Writer
	err error
}

// NewWriter returns a writer to w; call Flush at the end.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriter(w)} }

// Write writes one row.
func (w *Writer) Write(row []string) error {
	if w.err != nil {
		return w.err
	}
	for i, cell := range row {
		if i > 0 {
			w.w.WriteByte(',')
		}
		w.w.WriteByte('"')
		w.w.WriteString(strings.ReplaceAll(Cell(cell), `"`, `""`))
		_, w.err = w.w.WriteString(`"`)
	}
	if w.err == nil {
		_, w.err = w.w.WriteString("\n")
	}
	return w.err
}

// Flush writes what is buffered and reports the first error.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	w.err = w.w.Flush()
	return w.err
}
