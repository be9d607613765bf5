package rpc

import (
	"encoding"
	"encoding/json"
	"reflect"
	"sort"
	"time"
)

// The OpenRPC document is built by reflection over the registered P, R and
// E types. That is the one place reflection is worth it: it runs only when
// a client asks for rpc.discover, never on the call path.

type openRPCDoc struct {
	OpenRPC string          `json:"openrpc"`
	Info    openRPCInfo     `json:"info"`
	Methods []openRPCMethod `json:"methods"`
}

type openRPCInfo struct {
	Title   string `json:"title"`
	Version string `json:"version"`
}

type openRPCMethod struct {
	Name           string              `json:"name"`
	Summary        string              `json:"summary,omitempty"`
	Description    string              `json:"description,omitempty"`
	ParamStructure string              `json:"paramStructure"`
	Params         []contentDescriptor `json:"params"`
	Result         contentDescriptor   `json:"result"`
	Errors         []*Error            `json:"errors,omitempty"`
	// Subscription methods return an id; this extension describes the
	// events that follow as "subscription" notifications.
	Event *contentDescriptor `json:"x-subscription-event,omitempty"`
}

type contentDescriptor struct {
	Name   string  `json:"name"`
	Schema *schema `json:"schema"`
}

// schema is the subset of JSON Schema our Go types need. Properties is a
// map, which encoding/json writes in sorted order, so the document is
// deterministic.
type schema struct {
	Type                 string             `json:"type,omitempty"`
	Format               string             `json:"format,omitempty"`
	Description          string             `json:"description,omitempty"`
	ContentEncoding      string             `json:"contentEncoding,omitempty"`
	Minimum              *int               `json:"minimum,omitempty"`
	Items                *schema            `json:"items,omitempty"`
	Properties           map[string]*schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties *schema            `json:"additionalProperties,omitempty"`
}

func (s *Server) openRPC() *openRPCDoc {
	doc := &openRPCDoc{OpenRPC: "1.2.6", Info: openRPCInfo{Title: s.title, Version: s.ver}, Methods: []openRPCMethod{}}
	for _, name := range s.Methods() {
		doc.Methods = append(doc.Methods, describe(s.lookup(name)))
	}
	return doc
}

func describe(m *method) openRPCMethod {
	om := openRPCMethod{
		Name: m.name, Summary: m.doc.Summary, Description: m.doc.Description,
		ParamStructure: "either", Params: []contentDescriptor{}, Errors: m.doc.Errors,
	}
	fields := jsonFields(m.paramType)
	for _, n := range m.paramNames {
		for _, f := range fields {
			if f.name == n {
				om.Params = append(om.Params, contentDescriptor{Name: n, Schema: fieldSchema(f, map[reflect.Type]bool{})})
			}
		}
	}
	if m.subscribe != nil {
		om.Result = contentDescriptor{Name: "subscription", Schema: &schema{Type: "string"}}
		om.Event = &contentDescriptor{Name: "event", Schema: schemaOf(m.resultType, map[reflect.Type]bool{})}
	} else {
		om.Result = contentDescriptor{Name: "result", Schema: schemaOf(m.resultType, map[reflect.Type]bool{})}
	}
	return om
}

func fieldSchema(f field, seen map[reflect.Type]bool) *schema {
	sc := &schema{Type: "string"}
	if !f.asString {
		sc = schemaOf(f.typ, seen)
	}
	if f.doc != "" {
		c := *sc
		c.Description = f.doc
		sc = &c
	}
	return sc
}

var (
	timeType    = reflect.TypeFor[time.Time]()
	rawType     = reflect.TypeFor[json.RawMessage]()
	marshaler   = reflect.TypeFor[json.Marshaler]()
	textMarsh   = reflect.TypeFor[encoding.TextMarshaler]()
	zeroMinimum = 0
)

// schemaOf maps a Go type to the schema of its encoding/json form. seen
// breaks recursive types, which get the permissive {} below the first level.
func schemaOf(t reflect.Type, seen map[reflect.Type]bool) *schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return &schema{Type: "string", Format: "date-time"}
	case t == rawType, t.Implements(marshaler), reflect.PointerTo(t).Implements(marshaler):
		return &schema{}
	case t.Implements(textMarsh), reflect.PointerTo(t).Implements(textMarsh):
		return &schema{Type: "string"}
	}
	switch t.Kind() {
	case reflect.Bool:
		return &schema{Type: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &schema{Type: "integer"}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &schema{Type: "integer", Minimum: &zeroMinimum}
	case reflect.Float32, reflect.Float64:
		return &schema{Type: "number"}
	case reflect.String:
		return &schema{Type: "string"}
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return &schema{Type: "string", ContentEncoding: "base64"}
		}
		return &schema{Type: "array", Items: schemaOf(t.Elem(), seen)}
	case reflect.Map:
		return &schema{Type: "object", AdditionalProperties: schemaOf(t.Elem(), seen)}
	case reflect.Struct:
		if seen[t] {
			return &schema{}
		}
		seen[t] = true
		defer delete(seen, t)
		sc := &schema{Type: "object", Properties: map[string]*schema{}}
		for _, f := range jsonFields(t) {
			sc.Properties[f.name] = fieldSchema(f, seen)
			if !f.omitempty {
				sc.Required = append(sc.Required, f.name)
			}
		}
		sort.Strings(sc.Required)
		return sc
	default: // interfaces and anything encoding/json would reject
		return &schema{}
	}
}
