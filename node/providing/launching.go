package providing

import (
	"context"
	"errors"
)

// Launches and a stop. A job is launching from the moment its lease is
// recorded launched until its container runs as the lease's job (al.job)
// or has failed to start. A clean stop must end every job that runs, so
// the two meet under Provider.mu: a launch begins only while the provider
// is not stopping, and Shutdown, which marks it stopping under the same
// lock, sees every launch that began, calls it off and waits until it is
// over; a container that began all the same is by then the lease's job,
// and is preempted with the running ones. Whichever comes first, no job
// is started that Shutdown does not stop.

// starting is a launch in progress.
type starting struct {
	al      *activeLease
	callOff context.CancelCauseFunc // ends the launch's context with errStopping
	done    chan struct{}           // closed when the launch is over
}

// beginLaunch marks al launching, its start bounded by the context whose
// callOff it is; false: this provider is stopping, and the job must not
// start.
func (pj *Provider) beginLaunch(al *activeLease, callOff context.CancelCauseFunc) bool {
	pj.mu.Lock()
	defer pj.mu.Unlock()
	if pj.stopping.Load() {
		return false
	}
	al.starting = &starting{al: al, callOff: callOff, done: make(chan struct{})}
	return true
}

// endLaunch marks al's launch over, if it was launching: its job runs as
// al.job, or never started. Called with pj.mu held.
func (al *activeLease) endLaunch() {
	if st := al.starting; st != nil {
		close(st.done)
		al.starting = nil
	}
}

// calledOff: a launch's context was ended by a stop (Shutdown).
func calledOff(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errStopping) }

// SetLaunchHook is for tests: f runs in every run between its job's
// start (its container runs) and the job becoming the lease's, the window
// in which a stop must still find it; nil removes it.
func (pj *Provider) SetLaunchHook(f func(jobID string)) {
	if f == nil {
		pj.launchHook.Store(nil)
		return
	}
	pj.launchHook.Store(&f)
}

// launchedHook runs the test's launch hook, if any (SetLaunchHook).
func (pj *Provider) launchedHook(jobID string) {
	if f := pj.launchHook.Load(); f != nil {
		(*f)(jobID)
	}
}

// SetPullHook is for tests: f runs in every run whose job is started
// (its image pulled, its container made) once the renter was told it is
// pulling, before the executor starts it, so that a test can make the
// pull as slow as a busy registry or engine; nil removes it.
func (pj *Provider) SetPullHook(f func(jobID string)) {
	if f == nil {
		pj.pullHook.Store(nil)
		return
	}
	pj.pullHook.Store(&f)
}

// pulling runs the test's pull hook, if any (SetPullHook).
func (pj *Provider) pulling(jobID string) {
	if f := pj.pullHook.Load(); f != nil {
		(*f)(jobID)
	}
}
