package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// MethodDoc documents a method for rpc.discover and fixes its positional
// parameter order.
type MethodDoc struct {
	Summary     string
	Description string
	// ParamNames is the order of P's fields (by JSON name) when params is an
	// array; nil means the struct's field order.
	ParamNames []string
	// Errors lists the application errors the method can return.
	Errors []*Error
}

// method is the type-erased form of a registered handler. Everything that
// depends on P, R or E is captured in the closures at registration, so the
// request path does no reflection.
type method struct {
	name    string
	doc     MethodDoc
	builtin bool // rpc.discover and unsubscribe: not listed by Methods or OpenRPC

	// call runs a plain method and returns the encoded result.
	call func(ctx context.Context, params json.RawMessage) ([]byte, *Error)
	// subscribe starts a subscription handler under ctx (the subscription's
	// lifetime) and returns the pump that forwards its events.
	subscribe func(ctx context.Context, params json.RawMessage) (func(*subscription), *Error)

	paramType, resultType reflect.Type
	paramNames            []string
}

// Register adds a method. P must be a struct type (struct{} for none); see
// the package documentation for how params map onto it. Registering the same
// name twice, or a P that is not a struct, panics: both are programming
// errors found at start-up.
func Register[P, R any](s *Server, name string, doc MethodDoc, fn func(ctx context.Context, p P) (R, error)) {
	dec := newParamDecoder[P](name, doc.ParamNames)
	s.add(&method{
		name: name, doc: doc, paramNames: dec.names,
		paramType: reflect.TypeFor[P](), resultType: reflect.TypeFor[R](),
		call: func(ctx context.Context, raw json.RawMessage) ([]byte, *Error) {
			p, e := dec.decode(raw)
			if e != nil {
				return nil, e
			}
			r, err := fn(ctx, p)
			if err != nil {
				return nil, toError(err)
			}
			b, err := json.Marshal(r)
			if err != nil {
				return nil, Errorf(CodeInternal, "encoding result: %v", err)
			}
			return b, nil
		},
	})
}

// RegisterSubscription adds a WebSocket-only method whose result is a
// subscription id and whose events E follow as notifications. ctx is
// cancelled on unsubscribe or connection close; fn's producer must stop
// sending then (select on ctx.Done), and closes the channel to end the
// subscription normally.
func RegisterSubscription[P, E any](s *Server, name string, doc MethodDoc, fn func(ctx context.Context, p P) (<-chan E, error)) {
	dec := newParamDecoder[P](name, doc.ParamNames)
	s.add(&method{
		name: name, doc: doc, paramNames: dec.names,
		paramType: reflect.TypeFor[P](), resultType: reflect.TypeFor[E](),
		subscribe: func(ctx context.Context, raw json.RawMessage) (func(*subscription), *Error) {
			p, e := dec.decode(raw)
			if e != nil {
				return nil, e
			}
			ch, err := fn(ctx, p)
			if err != nil {
				return nil, toError(err)
			}
			if ch == nil {
				return nil, Errorf(CodeInternal, "%s returned no event channel", name)
			}
			return func(sub *subscription) { pump(sub, ch) }, nil
		},
	})
}

// paramDecoder turns params (object, array or absent) into P. The JSON names
// of P's fields are computed once here.
type paramDecoder[P any] struct {
	names  []string
	quoted [][]byte // names[i] as JSON strings, for rewriting arrays to objects
}

func newParamDecoder[P any](method string, names []string) *paramDecoder[P] {
	t := reflect.TypeFor[P]()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("rpc: %s: params type %v is not a struct", method, t))
	}
	fields := jsonFields(t)
	if names == nil {
		for _, f := range fields {
			names = append(names, f.name)
		}
	}
	d := &paramDecoder[P]{names: names}
	for _, n := range names {
		if !hasField(fields, n) {
			panic(fmt.Sprintf("rpc: %s: ParamNames entry %q is not a JSON field of %v", method, n, t))
		}
		q, _ := json.Marshal(n)
		d.quoted = append(d.quoted, q)
	}
	return d
}

func (d *paramDecoder[P]) decode(raw json.RawMessage) (P, *Error) {
	var p P
	switch {
	case raw == nil:
	case raw[0] == '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return p, paramsError(err)
		}
		if len(elems) > len(d.names) {
			return p, Errorf(CodeInvalidParams, "invalid params: too many positional params: got %d, want at most %d", len(elems), len(d.names))
		}
		// Positional params become an object keyed by ParamNames, so one
		// decoder (and its field-naming errors) serves both forms.
		obj := []byte{'{'}
		for i, el := range elems {
			if i > 0 {
				obj = append(obj, ',')
			}
			obj = append(append(append(obj, d.quoted[i]...), ':'), el...)
		}
		if e := decodeObject(append(obj, '}'), &p); e != nil {
			return p, e
		}
	default:
		if e := decodeObject(raw, &p); e != nil {
			return p, e
		}
	}
	if v, ok := any(&p).(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return p, &Error{Code: CodeInvalidParams, Message: "invalid params: " + err.Error()}
		}
	}
	return p, nil
}

func decodeObject(raw []byte, p any) *Error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return paramsError(err)
	}
	return nil
}

// paramsError names the offending field, since "invalid params" alone
// leaves a CLI user guessing.
func paramsError(err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return Errorf(CodeInvalidParams, "invalid params: cannot use %s as %v", te.Value, te.Type)
		}
		return Errorf(CodeInvalidParams, "invalid params: field %q: cannot use %s as %v", te.Field, te.Value, te.Type)
	}
	return Errorf(CodeInvalidParams, "invalid params: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// field is one JSON-visible struct field.
type field struct {
	name      string
	typ       reflect.Type
	omitempty bool
	asString  bool   // `json:",string"`
	doc       string // `doc:"..."` tag, shown in OpenRPC
}

// jsonFields lists the fields encoding/json would use, in declaration
// order, promoting untagged embedded structs. It ignores encoding/json's
// rules for conflicting promoted names, which our param types don't use.
func jsonFields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		out = append(out, field{
			name: name, typ: ft, doc: sf.Tag.Get("doc"),
			omitempty: strings.Contains(","+opts+",", ",omitempty,"),
			asString:  strings.Contains(","+opts+",", ",string,"),
		})
	}
	return out
}

func hasField(fs []field, name string) bool {
	for _, f := range fs {
		if f.name == name {
			return true
		}
	}
	return false
}
