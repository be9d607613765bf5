package auction

import (
	"testing"
	"time"
)

func TestUndisturbed(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	base := func() *Offer {
		return &Offer{GPUs: make([]GPU, 2), Windows: []Window{{Start: at(-time.Hour), End: at(5 * time.Hour)}}}
	}
	job := func(tier Tier, gpus int, expected, maxDur time.Duration) *JobSpec {
		return &JobSpec{Tier: tier, Resources: Resources{GPUs: gpus}, Duration: JobDuration{Expected: expected, Max: maxDur}}
	}
	gold := job(Gold, 1, time.Hour, time.Hour)
	gold.Start = now.Add(3 * time.Hour)
	for _, c := range []struct {
		name  string
		offer func(*Offer)
		spec  *JobSpec
		want  bool
	}{
		{"bronze fits its window", nil, job(Bronze, 2, 4*time.Hour, 8*time.Hour), true},
		{"bronze outlives the window", nil, job(Bronze, 1, 6*time.Hour, 6*time.Hour), false},
		{"the window continues in a touching one", func(o *Offer) {
			o.Windows = append(o.Windows, Window{Start: at(5 * time.Hour), End: at(9 * time.Hour)})
		}, job(Bronze, 1, 6*time.Hour, 6*time.Hour), true},
		{"a booked silver lease begins before bronze ends", func(o *Offer) {
			o.Booked = []Booking{{Start: at(2 * time.Hour), End: at(3 * time.Hour), GPUs: 2}}
		}, job(Bronze, 1, 3*time.Hour, 3*time.Hour), false},
		{"a booking leaves enough GPUs", func(o *Offer) {
			o.Booked = []Booking{{Start: at(2 * time.Hour), End: at(3 * time.Hour), GPUs: 1}}
		}, job(Bronze, 1, 3*time.Hour, 3*time.Hour), true},
		{"another bronze job holds the GPU now", func(o *Offer) {
			o.Bronze = []Booking{{Start: at(-time.Minute), End: at(time.Hour), GPUs: 2}}
		}, job(Bronze, 1, time.Hour, time.Hour), false},
		{"silver would preempt a bronze job", func(o *Offer) {
			o.Bronze = []Booking{{Start: at(-time.Minute), End: at(time.Hour), GPUs: 2}}
		}, job(Silver, 1, time.Hour, 2*time.Hour), false},
		{"silver beside a bronze job on the other GPU", func(o *Offer) {
			o.Bronze = []Booking{{Start: at(-time.Minute), End: at(time.Hour), GPUs: 1}}
		}, job(Silver, 1, time.Hour, 2*time.Hour), true},
		{"silver's maximum outlives the window", nil, job(Silver, 1, time.Hour, 6*time.Hour), false},
		{"gold after the bronze job ends", func(o *Offer) {
			o.Bronze = []Booking{{Start: at(-time.Minute), End: at(time.Hour), GPUs: 2}}
		}, gold, true},
		{"gold over a booking", func(o *Offer) {
			o.Booked = []Booking{{Start: at(3 * time.Hour), End: at(4 * time.Hour), GPUs: 2}}
		}, gold, false},
	} {
		o := base()
		if c.offer != nil {
			c.offer(o)
		}
		if got := Undisturbed(o, c.spec, now); got != c.want {
			t.Errorf("%s: Undisturbed = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFreeNow(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	o := &Offer{GPUs: make([]GPU, 8), Windows: []Window{{Start: at(-time.Hour), End: at(time.Hour)}},
		Booked: []Booking{{Start: at(-time.Minute), End: at(time.Minute), GPUs: 2}},
		Bronze: []Booking{{Start: at(-time.Minute), End: at(30 * time.Minute), GPUs: 3}}}
	if got := FreeNow(o, now); got != 3 {
		t.Errorf("8 GPUs, 2 booked, 3 bronze: FreeNow = %d, want 3", got)
	}
	if got := FreeNow(o, now.Add(10*time.Minute)); got != 5 {
		t.Errorf("after the booking ends: FreeNow = %d, want 5", got)
	}
	if got := FreeNow(o, now.Add(2*time.Hour)); got != 0 {
		t.Errorf("outside the window: FreeNow = %d, want 0", got)
	}
}
