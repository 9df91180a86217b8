package dshsession

import (
	"context"
	"sync"
)

// runContext runs f on a goroutine and waits for it or for ctx. When ctx
// wins, the result f returns later is handed to release (when f succeeded).
func runContext[T any](ctx context.Context, f func() (T, error), release func(T)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	var (
		mu        sync.Mutex
		abandoned bool
		done      = make(chan result, 1)
	)
	go func() {
		v, err := f()
		mu.Lock()
		gone := abandoned
		if !gone {
			done <- result{v, err}
		}
		mu.Unlock()
		if gone && err == nil && release != nil {
			release(v)
		}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case r := <-done: // finished while ctx was being cancelled: keep it
		return r.v, r.err
	default:
		abandoned = true
		return zero, ctx.Err()
	}
}

func closeStore(st *Store)    { _ = st.Close() }
func closeSession(s *Session) { _ = s.Close() }

// OpenStoreContext is OpenStore with a context: when ctx is done first it
// returns ctx.Err(), and the store, once opened in the background, is
// closed (see "Contexts" in the package documentation).
func OpenStoreContext(ctx context.Context, cfg Config) (*Store, error) {
	return runContext(ctx, func() (*Store, error) { return OpenStore(cfg) }, closeStore)
}

// OpenContext is Store.Open with a context: when ctx is done first it
// returns ctx.Err(), and the session, once opened (and repaired) in the
// background, is closed.
func (st *Store) OpenContext(ctx context.Context, id string) (*Session, error) {
	return runContext(ctx, func() (*Session, error) { return st.Open(id) }, closeSession)
}

// OpenWindowedContext is Store.OpenWindowed with a context, as OpenContext.
func (st *Store) OpenWindowedContext(ctx context.Context, id string, window int) (*Session, error) {
	return runContext(ctx, func() (*Session, error) { return st.OpenWindowed(id, window) }, closeSession)
}

// FlushContext is Session.Flush with a context: when ctx is done first it
// returns ctx.Err() while the flush goes on in the background (its error is
// lost; failed writes stay queued and the next Flush reports them).
func (s *Session) FlushContext(ctx context.Context) error {
	_, err := runContext(ctx, func() (struct{}, error) { return struct{}{}, s.Flush() }, nil)
	return err
}

// ForkContext is Session.Fork with a context: when ctx is done first it
// returns ctx.Err(); the child is still created in the background and then
// closed (it stays in the store under childID, or a generated id).
func (s *Session) ForkContext(ctx context.Context, boundary int64, childID string) (*Session, error) {
	return runContext(ctx, func() (*Session, error) { return s.Fork(boundary, childID) }, closeSession)
}
