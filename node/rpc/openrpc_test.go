package rpc

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// TestDiscover checks rpc.discover structurally (OpenRPC required members,
// exactly the registered methods) and byte-for-byte against
// testdata/discover.json (rewritten by -update).
func TestDiscover(t *testing.T) {
	_, hs := startWS(t)
	raw, err := NewClient(hs.URL, testToken).CallRaw(t.Context(), "rpc.discover", nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenRPC string `json:"openrpc"`
		Info    struct{ Title, Version string }
		Methods []struct {
			Name   string
			Params []struct {
				Name   string
				Schema map[string]any
			}
			Result *struct {
				Name   string
				Schema map[string]any
			}
			Errors []Error
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenRPC != "1.2.6" || doc.Info.Title != "gleaner-test" || doc.Info.Version != "0.0.1" {
		t.Fatalf("header: %+v", doc)
	}
	var names []string
	byName := map[string]int{}
	for i, m := range doc.Methods {
		names = append(names, m.Name)
		byName[m.Name] = i
		if m.Result == nil || m.Result.Name == "" || m.Result.Schema == nil || m.Params == nil {
			t.Errorf("%s: missing required members", m.Name)
		}
	}
	want := []string{"test_add", "test_count", "test_echo", "test_events", "test_fail", "test_panic", "test_plain", "test_positive"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("methods %v, want %v", names, want)
	}
	add := doc.Methods[byName["test_add"]]
	if len(add.Params) != 2 || add.Params[0].Name != "a" || add.Params[1].Name != "b" || add.Params[0].Schema["type"] != "integer" {
		t.Errorf("test_add params: %+v", add.Params)
	}
	if add.Result.Schema["type"] != "integer" {
		t.Errorf("test_add result: %+v", add.Result)
	}
	if fail := doc.Methods[byName["test_fail"]]; len(fail.Errors) != 1 || fail.Errors[0].Code != -32010 {
		t.Errorf("test_fail errors: %+v", fail.Errors)
	}

	var pretty bytes.Buffer
	json.Indent(&pretty, raw, "", "  ")
	pretty.WriteByte('\n')
	const golden = "testdata/discover.json"
	if *update {
		os.WriteFile(golden, pretty.Bytes(), 0o644)
		return
	}
	if want, _ := os.ReadFile(golden); !bytes.Equal(pretty.Bytes(), want) {
		t.Errorf("rpc.discover differs from %s (run with -update if intended):\n%s", golden, pretty.Bytes())
	}
}

type nested struct {
	When  string            `json:"when"`
	Tags  map[string]uint   `json:"tags,omitempty"`
	Blob  []byte            `json:"blob"`
	Self  *nested           `json:"self,omitempty"`
	Any   any               `json:"any"`
	Embed                   // promoted
	Skip  int               `json:"-"`
	Str   int64             `json:"str,string"`
	Raw   json.RawMessage   `json:"raw"`
	List  []float64         `json:"list"`
	Deep  map[string][]bool `json:"deep"`
}

type Embed struct {
	Inner string `json:"inner"`
}

func TestSchemaOf(t *testing.T) {
	b, _ := json.Marshal(schemaOf(reflect.TypeFor[nested](), map[reflect.Type]bool{}))
	const want = `{"type":"object","properties":{"any":{},"blob":{"type":"string","contentEncoding":"base64"},"deep":{"type":"object","additionalProperties":{"type":"array","items":{"type":"boolean"}}},"inner":{"type":"string"},"list":{"type":"array","items":{"type":"number"}},"raw":{},"self":{},"str":{"type":"string"},"tags":{"type":"object","additionalProperties":{"type":"integer","minimum":0}},"when":{"type":"string"}},"required":["any","blob","deep","inner","list","raw","str","when"]}`
	if string(b) != want {
		t.Fatalf("schema:\n%s\nwant\n%s", b, want)
	}
}
