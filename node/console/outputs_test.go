package console

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/gleaner-net/gleaner/node/rpc"
)

func TestOutputsDownload(t *testing.T) {
	var fetchedTo string
	f := &fakeCaller{results: map[string]any{
		"job_status": func(params any) (any, error) {
			id := params.(map[string]string)["id"]
			switch id {
			case "job-with":
				return jobRecord{ID: id, State: "completed", Outputs: "bafyoutputs"}, nil
			case "job-without":
				return jobRecord{ID: id, State: "completed"}, nil
			case "job-gone":
				return jobRecord{ID: id, State: "completed", Outputs: "bafygone"}, nil
			}
			return nil, &rpc.Error{Code: -32020, Message: "no job " + id}
		},
		"job_fetch": func(params any) (any, error) {
			p := params.(map[string]any)
			if p["id"] == "job-gone" {
				return nil, &rpc.Error{Code: -32023, Message: "no peer serves bafygone"}
			}
			dir := p["dir"].(string)
			fetchedTo = dir
			must := func(err error) {
				if err != nil {
					t.Fatal(err)
				}
			}
			must(os.MkdirAll(filepath.Join(dir, "ckpt"), 0o755))
			must(os.WriteFile(filepath.Join(dir, "result.txt"), []byte("42\n"), 0o644))
			must(os.WriteFile(filepath.Join(dir, "ckpt", "model.bin"), bytes.Repeat([]byte{7}, 70_000), 0o644))
			must(os.Symlink("/etc/passwd", filepath.Join(dir, "escape"))) // never followed, never archived
			return map[string]any{"cid": "bafyoutputs", "bytes": 70_003}, nil
		},
		"job_explain": jobExplain{}, "job_logs": jobLogs{},
	}}
	c := testConsole(t, f, nil)
	ck, _ := login(t, c)

	w := do(c, "GET", "/ui/jobs/job-with", nil, withCookie(ck))
	mustContain(t, w.Body.String(), `<a href="/ui/jobs/job-with/outputs.tar" download>Download the outputs</a>`, "<code>bafyoutputs</code>")
	w = do(c, "GET", "/ui/jobs/job-without", nil, withCookie(ck))
	mustContain(t, w.Body.String(), "No outputs to download")

	w = do(c, "GET", "/ui/jobs/job-with/outputs.tar", nil, withCookie(ck))
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/x-tar" ||
		w.Header().Get("Content-Disposition") != `attachment; filename="job-with-outputs.tar"` {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
	got := map[string]string{}
	tr := tar.NewReader(w.Body)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	if len(got) != 4 || got["outputs/result.txt"] != "42\n" || len(got["outputs/ckpt/model.bin"]) != 70_000 || got["outputs/ckpt/"] != "" {
		t.Errorf("archive holds %d entries: %v", len(got), keys(got))
	}
	if _, err := os.Stat(fetchedTo); !os.IsNotExist(err) {
		t.Errorf("the temporary copy at %s is left behind: %v", fetchedTo, err)
	}

	if w := do(c, "GET", "/ui/jobs/job-without/outputs.tar", nil, withCookie(ck)); w.Code != http.StatusNotFound {
		t.Errorf("a job without outputs: %d", w.Code)
	}
	w = do(c, "GET", "/ui/jobs/job-gone/outputs.tar", nil, withCookie(ck))
	if w.Code != http.StatusBadGateway {
		t.Errorf("a fetch that fails: %d", w.Code)
	}
	mustContain(t, w.Body.String(), "no peer serves bafygone")
	if w := do(c, "GET", "/ui/jobs/job-with/outputs.tar", nil, nil); w.Code != http.StatusSeeOther {
		t.Errorf("a download without a session: %d", w.Code)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
