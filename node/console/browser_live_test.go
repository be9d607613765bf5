package console_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node"
	"github.com/gleaner-net/gleaner/node/earnings"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/testnet"
	"github.com/gleaner-net/gleaner/testnet/demoimage"
	"github.com/gleaner-net/gleaner/testnet/modelimage"
)

// TestConsoleLiveInChromium: the renter's job page shows the job's output
// as it prints it (live.js over /ui/jobs/{id}/follow), and its end; the
// services page with no service, then a real service's pages (the model
// server's replica on the provider) with service_status's figures; the
// spend page shows what ledger_spend returns; another site cannot
// open the follow socket. With GLEANER_CONSOLE_SHOTS=dir it saves
// screenshots too.
func TestConsoleLiveInChromium(t *testing.T) {
	chromium := requireChromium(t)
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		t.Fatalf("this needs a running Docker engine (the job runs in a real container): %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := testnet.BuildDemoImage(ctx, "../.."); err != nil {
		t.Fatal(err)
	}
	c, err := testnet.NewCluster(ctx, testnet.ClusterOptions{Nodes: 2, Configure: func(i int, cfg *repo.Config) {
		if i == 0 {
			cfg.Provider.SimulateGPUs = "1xRTX4090"
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prov, _ := c.Client(0)
	rent, _ := c.Client(1)
	region, bronze, silver := "eu/DE", "0.40", "0.70"
	var shown node.OfferShowResult
	if err := prov.Call(ctx, "offer_set", offers.Patch{Region: &region, PriceBronze: &bronze, PriceSilver: &silver}, &shown); err != nil || !shown.Offered {
		t.Fatalf("offer_set: %v (%s)", err, shown.Reason)
	}
	provID := c.Nodes()[0].Host().ID().String()
	waitFor(t, 20*time.Second, "the offer in the renter's book", func() bool {
		var res node.MarketOffersResult
		return rent.Call(ctx, "market_offers", node.MarketOffersParams{}, &res) == nil && len(res.Offers) == 1 && res.Offers[0].Provider == provID
	})

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	b, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	if err := chromedp.Do(b); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	shots := os.Getenv("GLEANER_CONSOLE_SHOTS")
	shot := func(name string) {
		if shots == "" {
			return
		}
		png := get(t, b, chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string { return strings.TrimSpace(get(t, b, chromedp.Text(chromedp.CSS(sel)))) }
	n := c.Nodes()[1]
	base := n.RPCURL()
	tok, err := n.Repo().Token()
	if err != nil {
		t.Fatal(err)
	}
	do(t, b, chromedp.Navigate(base+"/ui/login"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), tok), chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#peer-id")))

	// A job that prints a line every 2 s for 16 s, and writes outputs.
	spec := fmt.Sprintf("name: live\nimage: %s\ncommand: [\"-sleep\", \"16s\", \"-lines\", \"8\", \"-write\", \"/outputs\"]\nresources: {gpus: 1}\ntier: silver\nmax_price: 1.00\nduration: {expected: 5m, max: 10m}\nallow_simulated: true\noutputs: {path: /outputs, max_size: 16MiB}\n", testnet.DemoImage)
	var job renting.JobRecord
	if err := rent.Call(ctx, "job_submit", node.JobSubmitParams{Spec: spec}, &job); err != nil {
		t.Fatal(err)
	}
	defer rent.Call(context.Background(), "job_cancel", node.JobIDParams{ID: job.ID}, nil)
	do(t, b, chromedp.Navigate(base+"/ui/jobs/"+job.ID), chromedp.WaitVisible(chromedp.CSS("#log")))
	if got := text("#job .state"); got == renting.StateCompleted {
		t.Fatalf("the job ended before its page loaded")
	}
	loaded := get(t, b, chromedp.Text(chromedp.CSS("#log")))
	// Lines the page did not have when it loaded appear, without a reload.
	var want string
	for i := 8; i >= 1; i-- {
		if !strings.Contains(loaded, fmt.Sprintf("step %d/8 done", i)) {
			want = fmt.Sprintf("step %d/8 done", i)
			continue
		}
		break
	}
	if want == "" {
		t.Fatalf("the page loaded with all the output already: %q", loaded)
	}
	waitFor(t, time.Minute, "live output "+want, func() bool {
		return strings.Contains(get(t, b, chromedp.Text(chromedp.CSS("#log"))), want)
	})
	if s := text("#live-status"); !strings.HasPrefix(s, "Live") && !strings.Contains(s, "ended") {
		t.Errorf("live status %q", s)
	}
	shot("renter-job-live")
	waitFor(t, time.Minute, "the page showing the job's end", func() bool {
		return strings.Contains(text("#live-status"), "has ended")
	})
	if got := text("#job .state"); !strings.HasPrefix(got, renting.StateCompleted) {
		t.Errorf("after the end the page shows state %q", got)
	}
	if got := get(t, b, chromedp.Text(chromedp.CSS("#log"))); !strings.Contains(got, "job finished") || !strings.Contains(got, "[state] completed") {
		t.Errorf("the output at the end: %q", got)
	}
	// The ended job's page has no script and no socket.
	do(t, b, chromedp.Navigate(base+"/ui/jobs/"+job.ID), chromedp.WaitVisible(chromedp.CSS("#log")))
	if get(t, b, chromedp.Evaluate[bool](`document.querySelector("script") !== null || document.getElementById("live-status") !== null`)) {
		t.Error("an ended job's page still follows")
	}
	downloadOutputs(t, b, ctx, rent, base, job.ID)
	shot("renter-job-outputs")

	// Services: none on this node.
	var svcs []services.ServiceView
	if err := rent.Call(ctx, "service_list", nil, &svcs); err != nil || len(svcs) != 0 {
		t.Fatalf("service_list: %v %v", err, svcs)
	}
	do(t, b, chromedp.Navigate(base+"/ui/services"), chromedp.WaitVisible(chromedp.CSS("#service-count")))
	if got := text("#service-count"); !strings.HasPrefix(got, "No services") {
		t.Errorf("services page: %q", got)
	}
	shot("renter-services")

	// Spend: the numbers ledger_spend gives.
	var sp earnings.SpendResult
	waitFor(t, 30*time.Second, "the job's lease in ledger_spend", func() bool {
		return rent.Call(ctx, "ledger_spend", earnings.PeriodParams{Days: 14}, &sp) == nil && len(sp.Leases) == 1
	})
	var bal node.BalanceResult
	if err := rent.Call(ctx, "ledger_balance", nil, &bal); err != nil {
		t.Fatal(err)
	}
	do(t, b, chromedp.Navigate(base+"/ui/spend?days=14"), chromedp.WaitVisible(chromedp.CSS("#spent")))
	if got, want := text("#spent"), auction.FormatCredits(sp.Spent)+" credits from"; !strings.HasPrefix(got, want) {
		t.Errorf("spend page: %q, ledger_spend: %q", got, want)
	}
	if got, want := text("#balance"), auction.FormatCredits(bal.Balance)+" credits"; !strings.HasPrefix(got, want) {
		t.Errorf("spend page balance: %q, ledger_balance: %q", got, want)
	}
	if got := text("#leases tbody"); !strings.Contains(got, job.ID) || !strings.Contains(got, auction.FormatCredits(sp.Leases[0].Spent)+" credits") {
		t.Errorf("spend page's leases: %q, ledger_spend: %+v", got, sp.Leases)
	}
	shot("renter-spend")

	// A real service: one replica of the model server on the provider,
	// some completions through its gateway, and its pages show what
	// service_status says.
	workloads := []string{"batch", "service"}
	if err := prov.Call(ctx, "offer_set", offers.Patch{Workloads: &workloads}, &shown); err != nil || !shown.Offered {
		t.Fatalf("offer_set workloads: %v (%s)", err, shown.Reason)
	}
	if err := modelimage.Build(ctx, "../.."); err != nil {
		t.Fatal(err)
	}
	svcSpec := fmt.Sprintf("name: chat\nkind: service\nimage: %s\nenv: {MODELSERVER_LOAD_DELAY: 100ms, MODELSERVER_TOKEN_DELAY: 1ms}\n"+
		"service:\n  port: %d\n  readiness: {path: /health, period: 1s}\n  replicas: {min: 1, max: 1}\n"+
		"resources: {gpus: 1}\ntier: bronze\nmax_price: 1.00\nduration: {max: 1h}\nallow_simulated: true\n", modelimage.Tag, modelimage.Port)
	var up services.ServiceView
	if err := rent.Call(ctx, "service_up", services.ServiceUpParams{Spec: svcSpec}, &up); err != nil {
		t.Fatal(err)
	}
	defer rent.Call(context.Background(), "service_down", services.ServiceNameParams{Name: "chat"}, nil)
	var sv services.ServiceView
	waitFor(t, time.Minute, "the service's replica ready", func() bool {
		return rent.Call(ctx, "service_status", services.ServiceNameParams{Name: "chat"}, &sv) == nil && len(sv.Replicas) == 1 && sv.Replicas[0].Ready
	})
	const sent = 12
	for i := range sent {
		resp, err := http.Post(up.URL+"/v1/completions", "application/json", strings.NewReader(`{"model":"gleaner-test-model","prompt":"hi","max_tokens":4}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("completion %d through the gateway: status %d", i, resp.StatusCode)
		}
	}
	if err := rent.Call(ctx, "service_status", services.ServiceNameParams{Name: "chat"}, &sv); err != nil || sv.Stats == nil {
		t.Fatalf("service_status: %v %+v", err, sv)
	}
	if sv.Stats.Requests != sent || sv.Stats.CompletionTokens != 4*sent {
		t.Fatalf("service_status counts %d requests and %d completion tokens, want %d and %d", sv.Stats.Requests, sv.Stats.CompletionTokens, sent, 4*sent)
	}
	do(t, b, chromedp.Navigate(base+"/ui/services"), chromedp.WaitVisible(chromedp.CSS("#service-count")))
	if got := text("#services tbody"); !strings.Contains(got, "chat") || !strings.Contains(got, up.URL) {
		t.Errorf("services page: %q, want the service and its URL %s", got, up.URL)
	}
	do(t, b, chromedp.Navigate(base+"/ui/services/chat"), chromedp.WaitVisible(chromedp.CSS("#figures")))
	if got, want := text("#requests"), fmt.Sprintf("%d (%d error(s)", sv.Stats.Requests, sv.Stats.Errors); !strings.HasPrefix(got, want) {
		t.Errorf("service page requests: %q, service_status: %q", got, want)
	}
	if got := text("#ready"); got != "1 of 1" {
		t.Errorf("service page ready: %q", got)
	}
	if got := text("#replicas tbody"); !strings.Contains(got, sv.Replicas[0].Job) || !strings.Contains(got, "ready") {
		t.Errorf("service page replicas: %q, service_status: %+v", got, sv.Replicas)
	}
	if n := get(t, b, chromedp.Evaluate[int](`document.querySelectorAll("#service-charts figure svg").length`)); n != 4 {
		t.Errorf("service page: %d charts, want throughput, latency and both costs", n)
	}
	shot("renter-service")

	// Another site's page cannot follow a job through this browser.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><p id="out">waiting</p>`)
	}))
	defer evil.Close()
	other := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "/ui/jobs/" + job.ID + "/follow"
	do(t, b, chromedp.Navigate(other), chromedp.WaitVisible(chromedp.CSS("#out")))
	js := `new Promise(function (done) { var got = "opened:"; var ws = new WebSocket(` + fmt.Sprintf("%q", wsURL) + `);
		ws.onmessage = function (m) { got += m.data; }; ws.onerror = function () { done("refused"); };
		ws.onclose = function () { done(got.length > 7 ? got : "refused"); }; })`
	res := get(t, b, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if res != "refused" {
		t.Errorf("a cross-site page followed the job: %q", res)
	}
}

// downloadOutputs follows the ended job's download link in the browser
// (its session, no token) and checks the tar holds what the job wrote,
// as job_status names them.
func downloadOutputs(t *testing.T, b context.Context, ctx context.Context, rent *rpc.Client, base, id string) {
	t.Helper()
	var j renting.JobRecord
	waitFor(t, 30*time.Second, "the job's outputs in job_status", func() bool {
		return rent.Call(ctx, "job_status", node.JobIDParams{ID: id}, &j) == nil && j.Outputs != ""
	})
	do(t, b, chromedp.Navigate(base+"/ui/jobs/"+id), chromedp.WaitVisible(chromedp.CSS("#outputs a")))
	if got := strings.TrimSpace(get(t, b, chromedp.Text(chromedp.CSS("#outputs code")))); got != j.Outputs {
		t.Errorf("job page names outputs %q, job_status %q", got, j.Outputs)
	}
	// fetch() from the page: the browser's own session cookie, same origin.
	got := get(t, b, chromedp.Evaluate[string](`(async () => {
		const r = await fetch(document.querySelector("#outputs a").getAttribute("href"));
		const b = new Uint8Array(await r.arrayBuffer());
		let s = "";
		for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode.apply(null, b.subarray(i, i + 0x8000));
		return r.status + " " + r.headers.get("content-type") + " " + btoa(s);
	})()`, chromedp.EvalAwaitPromise))
	head, enc, _ := strings.Cut(got, " application/x-tar ")
	if head != "200" {
		t.Fatalf("the download: %.200s", got)
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the download is not a tar: %v", err)
		}
		if h.Typeflag == tar.TypeReg {
			files[strings.TrimPrefix(h.Name, "outputs/")], _ = io.ReadAll(tr)
		}
	}
	want := demoimage.Results()
	if len(files) != len(want) {
		t.Errorf("the tar holds %d files, the job wrote %d", len(files), len(want))
	}
	for rel, w := range want {
		if !bytes.Equal(files[rel], w) {
			t.Errorf("%s: %d bytes downloaded, the job wrote %d", rel, len(files[rel]), len(w))
		}
	}
}
