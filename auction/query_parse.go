package auction

import (
	"fmt"
	"strings"
)

// The query grammar (whitespace may appear between any two tokens and is
// needed only to separate words):
//
//	query  = { clause } .                     all clauses must hold; empty matches every live offer
//	clause = field op value | field listop list .
//	field  = one of QueryFields(), e.g. vram, price.bronze .
//	op     = "=" | "!=" | "<" | "<=" | ">" | ">=" .
//	listop = "in" | "notin" .
//	list   = "[" word { "," word } "]" .
//	value  = word .
//	word   = 1*( any byte but whitespace and = ! < > [ ] , ) .
//
// Examples: `gpu in [H100,A100-80GB] vram>=40 region=eu price.bronze<=1.5`,
// `available >= 4h workload=batch simulated=false`.

type tokKind int

const (
	tWord tokKind = iota
	tOp
	tLBrack
	tRBrack
	tComma
)

type token struct {
	kind tokKind
	text string
	pos  int // 1-based column, for error messages
}

func errAt(pos int, format string, args ...any) error {
	return fmt.Errorf("%w: at column %d: %s", ErrBadQuery, pos, fmt.Sprintf(format, args...))
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isSpecial(c byte) bool { return strings.IndexByte("=!<>[],", c) >= 0 || isSpace(c) }

func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case isSpace(c):
			i++
		case c == '[' || c == ']' || c == ',':
			toks = append(toks, token{tLBrack + tokKind(strings.IndexByte("[],", c)), s[i : i+1], i + 1})
			i++
		case c == '=' || c == '!' || c == '<' || c == '>':
			j := i + 1
			if c != '=' && j < len(s) && s[j] == '=' {
				j++
			}
			if c == '!' && j == i+1 {
				return nil, errAt(i+1, "'!' must be followed by '=' (operators: %s)", strings.Join(opNames[:], " "))
			}
			if c == '=' && j < len(s) && s[j] == '=' {
				return nil, errAt(i+1, "'==' is not an operator; write '='")
			}
			toks = append(toks, token{tOp, s[i:j], i + 1})
			i = j
		default:
			j := i
			for j < len(s) && !isSpecial(s[j]) {
				j++
			}
			toks = append(toks, token{tWord, s[i:j], i + 1})
			i = j
		}
	}
	return toks, nil
}

// ParseQuery parses a query; see the grammar above and QueryFields. It
// fails closed: an unknown field, an operator the field's type does not
// support, or a malformed value is an error naming the problem, never a
// clause silently dropped.
func ParseQuery(s string) (*Query, error) {
	if len(s) > MaxQueryLen {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBadQuery, len(s), MaxQueryLen)
	}
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	q := &Query{}
	for i := 0; i < len(toks); {
		c, next, err := parseClause(toks, i)
		if err != nil {
			return nil, err
		}
		if len(q.clauses) == MaxQueryClauses {
			return nil, errAt(toks[i].pos, "more than %d clauses", MaxQueryClauses)
		}
		q.clauses = append(q.clauses, c)
		i = next
	}
	for i := range q.clauses {
		if q.clauses[i].field.kind == kindGPU {
			q.gpu = append(q.gpu, &q.clauses[i])
		}
	}
	return q, nil
}

func parseClause(toks []token, i int) (clause, int, error) {
	var c clause
	ft := toks[i]
	if ft.kind != tWord {
		return c, 0, errAt(ft.pos, "expected a field name, got %q (fields: %s)", ft.text, fieldNames(false))
	}
	fd := fieldByName[ft.text]
	if fd == nil {
		return c, 0, errAt(ft.pos, "unknown field %q (fields: %s)", ft.text, fieldNames(false))
	}
	c.field = fd
	i++
	if i == len(toks) {
		return c, 0, errAt(ft.pos, "%s: missing operator and value", fd.Name)
	}
	ot := toks[i]
	o := -1
	for k, name := range opNames {
		if ot.text == name && (ot.kind == tOp || ot.kind == tWord && k >= int(opIn)) {
			o = k
		}
	}
	if o < 0 {
		return c, 0, errAt(ot.pos, "%s: expected an operator (%s), got %q", fd.Name, strings.Join(opNames[:], " "), ot.text)
	}
	c.op = op(o)
	if !contains(fd.Ops, ot.text) {
		return c, 0, errAt(ot.pos, "%s (%s) does not support %s; it supports %s", fd.Name, fd.Type, ot.text, strings.Join(fd.Ops, " "))
	}
	i++
	list := c.op == opIn || c.op == opNotIn
	if i == len(toks) {
		return c, 0, errAt(ot.pos, "%s %s: missing value", fd.Name, ot.text)
	}
	if !list {
		vt := toks[i]
		if vt.kind != tWord {
			return c, 0, errAt(vt.pos, "%s %s: expected a value, got %q (lists need in or notin)", fd.Name, ot.text, vt.text)
		}
		if err := c.parseValue(vt.text); err != nil {
			return c, 0, errAt(vt.pos, "%v", err)
		}
		return c, i + 1, nil
	}
	if toks[i].kind != tLBrack {
		return c, 0, errAt(toks[i].pos, "%s %s: expected a list such as [a,b], got %q", fd.Name, ot.text, toks[i].text)
	}
	for i++; ; i++ {
		if i == len(toks) || toks[i].kind != tWord {
			return c, 0, errAt(at(toks, i), "%s %s: expected a list value", fd.Name, ot.text)
		}
		if len(c.raw) == MaxQueryValues {
			return c, 0, errAt(toks[i].pos, "%s %s: more than %d values", fd.Name, ot.text, MaxQueryValues)
		}
		if err := c.parseValue(toks[i].text); err != nil {
			return c, 0, errAt(toks[i].pos, "%v", err)
		}
		i++
		if i < len(toks) && toks[i].kind == tRBrack {
			return c, i + 1, nil
		}
		if i == len(toks) || toks[i].kind != tComma {
			return c, 0, errAt(at(toks, i), "%s %s: expected ',' or ']' in the list", fd.Name, ot.text)
		}
	}
}

// at is the column of toks[i], or just past the last token at the end.
func at(toks []token, i int) int {
	if i < len(toks) {
		return toks[i].pos
	}
	last := toks[len(toks)-1]
	return last.pos + len(last.text)
}
