package dshsession

import "sync"

// gate keeps a handle from being freed under a call on it. Calls enter and
// leave; shut turns new calls away at once and waits for the calls in
// flight. Unlike a sync.RWMutex held for reading, a call may enter again
// while it is in flight on the same goroutine (a store observer runs inside
// the call that triggered it and may read the session), and no waiting
// Close can block that nested call: it enters, or fails with ErrClosed once
// Close has begun.
type gate struct {
	mu      sync.Mutex
	calls   int           // calls in flight
	closing bool          // shut was called: the handle is closed or closing
	drained chan struct{} // closed when calls drops to 0 during shut
}

// enter admits a call; false once the gate is shut. Every true must be
// matched by a leave.
func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.calls++
	return true
}

// leave ends a call admitted by enter.
func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls--
	if g.calls == 0 && g.drained != nil {
		close(g.drained)
		g.drained = nil
	}
}

// shut turns every later call away, waits until the calls in flight have
// left, and reports whether this was the first shut (the caller then owns
// the handle and frees it). A later shut returns false at once, without
// waiting for the first one to finish.
func (g *gate) shut() bool {
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		return false
	}
	g.closing = true
	var wait chan struct{}
	if g.calls > 0 {
		g.drained = make(chan struct{})
		wait = g.drained
	}
	g.mu.Unlock()
	if wait != nil {
		<-wait
	}
	return true
}
