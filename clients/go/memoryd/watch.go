package memoryd

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
)

// ErrWatchClosed is what Next returns once Close was called.
var ErrWatchClosed = errors.New("memoryd: the watch is closed")

// errStalled ends a stream on which nothing arrived for WatchStallFactor heartbeat intervals.
var errStalled = errors.New("memoryd: nothing arrived on the watch stream, not even a heartbeat")

// WatchOption configures one Watcher.
type WatchOption func(*Watcher)

// WithHeartbeats makes Next return the server's heartbeats too (resp.GetHeartbeat() != nil),
// not only changes: a caller that stores the cursor can then store it while nothing changes.
func WithHeartbeats() WatchOption { return func(w *Watcher) { w.heartbeats = true } }

// Watcher reads a Watch stream and keeps it open. It remembers the cursor of the last message
// received; when the stream fails with UNAVAILABLE, ends without an error, or stalls (nothing,
// not even a heartbeat, for WatchStallFactor heartbeat intervals), it opens the stream again
// from that cursor, after the retry policy's backoff, as often as it takes: the changes it
// returns are every change after the start, each exactly once, in commit order. Any other error
// (INVALID_ARGUMENT, PERMISSION_DENIED, UNAUTHENTICATED, FAILED_PRECONDITION CURSOR_EXPIRED,
// RESOURCE_EXHAUSTED TOO_MANY_STREAMS, ...) ends the watch: Next returns it as an *Error, then
// and on every later call.
//
// Next, Cursor and Close may not be called concurrently with each other, except Close, which
// may be called from any goroutine to stop a Next that is waiting.
type Watcher struct {
	c          *Client
	memory     pb.MemoryServiceClient // the client's, or over own after a silence
	mu         sync.Mutex             // guards own against Close
	own        *grpc.ClientConn       // the watch's own connection, once a stream went silent
	ctx        context.Context        // the watch's life: the context given to Watch, ended by Close
	stop       context.CancelCauseFunc
	req        *pb.WatchRequest
	heartbeats bool
	cursor     string
	live       *liveStream   // the open stream, nil between a failure and the next open
	failures   int           // opens in a row that delivered nothing
	retryDelay time.Duration // the server's RetryInfo delay on the last failure
	reopenAt   time.Time     // when the backoff before the next open ends (zero: not begun)
	err        error         // what ended the watch
}

// liveStream is one open Watch call, read by its own goroutine so that Next can wait on a
// context: it holds at most one message (gRPC's flow control holds back the rest), so a slow
// reader never makes the client buffer without bound.
type liveStream struct {
	ctx      context.Context
	cancel   context.CancelFunc
	msgs     chan *pb.WatchResponse
	accepted chan struct{} // closed when the response headers arrived, or the stream ended
	done     chan struct{} // closed when the stream ended; err and trailer then say how
	err      error
	trailer  metadata.MD
}

// Watch opens a stream of the changes to req's subject (or, with AllSubjects, to every
// subject) that the caller's view reads, from req.Cursor if set, else from now. The stream has
// no deadline: ctx (cancel it) or Close ends it. The token provider is asked before every
// (re)open. A failure to open is not returned here: Next returns it, or opens again when it is
// UNAVAILABLE.
//
//	w, err := c.Watch(ctx, &pb.WatchRequest{Subject: "alice"})
//	if err != nil { ... }
//	defer w.Close()
//	for {
//		resp, err := w.Next(ctx)
//		if err != nil { return err }
//		fmt.Println(resp.GetChange().GetKind(), resp.GetChange().GetMemory().GetText())
//		save(w.Cursor()) // to resume after a restart: Watch with Cursor: saved
//	}
func (c *Client) Watch(ctx context.Context, req *pb.WatchRequest, opts ...WatchOption) (*Watcher, error) {
	if req == nil {
		return nil, errNilRequest
	}
	wctx, stop := context.WithCancelCause(withTraceContext(ctx, c.opts.propagator))
	w := &Watcher{c: c, memory: c.memory, ctx: wctx, stop: stop, req: proto.Clone(req).(*pb.WatchRequest),
		cursor: req.GetCursor()}
	for _, opt := range opts {
		opt(w)
	}
	if err := w.open(); err != nil {
		stop(err)
		return nil, err
	}
	return w, nil
}

// Cursor is the cursor of the last message received (heartbeats included), or the request's
// cursor before any: a Watch with it resumes right after that message.
func (w *Watcher) Cursor() string { return w.cursor }

// Close ends the watch and its stream; Next then returns ErrWatchClosed.
func (w *Watcher) Close() error {
	w.stop(ErrWatchClosed)
	w.mu.Lock()
	own := w.own
	w.own = nil
	w.mu.Unlock()
	if own != nil {
		return own.Close()
	}
	return nil
}

// WaitOpen waits until the server has accepted the watcher's stream (its response headers
// arrived), so that a change committed after WaitOpen returns nil is delivered. A stream that
// failed meanwhile also returns nil: Next says how, or resumes it. It returns ctx.Err() when
// ctx ends first.
func (w *Watcher) WaitOpen(ctx context.Context) error {
	if w.err != nil {
		return w.err
	}
	if w.live == nil {
		if err := w.reopen(ctx); err != nil {
			return err
		}
	}
	select {
	case <-w.live.accepted:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Next waits for the next change (or heartbeat, WithHeartbeats) and returns it. ctx bounds
// this wait only: when it ends, Next returns ctx.Err() and the stream stays open for the next
// call. An error of the stream other than those it resumes after ends the watch (see Watcher).
func (w *Watcher) Next(ctx context.Context) (*pb.WatchResponse, error) {
	for {
		if w.err != nil {
			return nil, w.err
		}
		if w.ctx.Err() != nil {
			return nil, w.end(context.Cause(w.ctx))
		}
		if w.live == nil {
			if err := w.reopen(ctx); err != nil {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case resp := <-w.live.msgs:
			w.failures, w.retryDelay = 0, 0
			w.cursor = resp.GetCursor()
			if resp.GetHeartbeat() != nil && !w.heartbeats {
				continue
			}
			return resp, nil
		case <-w.live.done:
			ended := w.live
			w.live = nil
			ended.cancel()
			if w.ctx.Err() != nil {
				continue // closed: the stream only ended because the watch did
			}
			if !resumable(ended.err) {
				return nil, w.end(toError(ended.err, ended.trailer, w.failures+1))
			}
			if errors.Is(ended.err, errStalled) {
				w.reconnect()
			}
			w.failures++
			w.retryDelay = 0
			var merr *Error
			if errors.As(toError(ended.err, ended.trailer, w.failures), &merr) {
				w.retryDelay = merr.RetryDelay
			}
		}
	}
}

// reconnect moves the watch to a new connection of its own (when the client dialled its own):
// a silent stream may sit on a half-open connection, which gRPC keeps until TCP gives up, and
// a stream reopened on it would go silent again.
func (w *Watcher) reconnect() {
	if w.c.redial == nil {
		return
	}
	conn, err := w.c.redial()
	if err != nil {
		return // the next open goes over the old connection, and its failure is read as usual
	}
	w.mu.Lock()
	old := w.own
	if w.ctx.Err() != nil {
		old, w.own = conn, nil // closed meanwhile
	} else {
		w.own = conn
		w.memory = pb.NewMemoryServiceClient(conn)
	}
	w.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
}

// end ends the watch with err, which every later Next returns.
func (w *Watcher) end(err error) error {
	w.err = err
	w.stop(err) // first: the watch's cause is err, not ErrWatchClosed
	_ = w.Close()
	if w.live != nil {
		w.live.cancel()
		w.live = nil
	}
	return err
}

// resumable says whether a stream that ended with err is opened again from the cursor.
func resumable(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, errStalled) {
		return true // ended without a status (a server shutting down), or went silent
	}
	var merr *Error
	return errors.As(toError(err, nil, 0), &merr) && retryableCode(merr.Code)
}

// reopen waits the backoff the failures so far call for, then opens the stream from the cursor.
// A wait that ctx cut short is resumed, not begun again, by the next call: short waits still
// reach the open.
func (w *Watcher) reopen(ctx context.Context) error {
	if w.failures > 0 {
		wait := max(w.c.opts.retry.Backoff(w.failures), w.retryDelay)
		if w.reopenAt.IsZero() {
			w.reopenAt = time.Now().Add(wait)
		} else {
			wait = max(time.Until(w.reopenAt), 0)
		}
		either, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(w.ctx, cancel)
		err := w.c.opts.sleep(either, wait)
		stop()
		cancel()
		if err != nil {
			if w.ctx.Err() != nil {
				return w.end(context.Cause(w.ctx))
			}
			return ctx.Err()
		}
	}
	w.reopenAt = time.Time{}
	return w.open()
}

// open starts a stream from the cursor; a failure to start is read by Next like a stream's end.
func (w *Watcher) open() error {
	sctx, cancel := context.WithCancel(w.ctx)
	actx, err := w.c.withToken(sctx)
	if err != nil {
		cancel()
		return err
	}
	req := w.req
	if w.cursor != req.GetCursor() {
		req = proto.Clone(req).(*pb.WatchRequest)
		req.Cursor = w.cursor
	}
	l := &liveStream{ctx: sctx, cancel: cancel, msgs: make(chan *pb.WatchResponse),
		accepted: make(chan struct{}), done: make(chan struct{})}
	w.live = l
	stream, err := w.memory.Watch(actx, req)
	if err != nil {
		l.err = err
		close(l.accepted)
		close(l.done)
		return nil
	}
	go l.receive(stream, time.Duration(WatchStallFactor)*w.c.opts.heartbeat)
	return nil
}

// receive hands the stream's messages to Next one at a time until the stream ends, and ends
// it when nothing arrives for stall (0: never).
func (l *liveStream) receive(stream grpc.ServerStreamingClient[pb.WatchResponse], stall time.Duration) {
	defer close(l.done)
	accepted := false
	for {
		var timer *time.Timer
		if stall > 0 {
			timer = time.AfterFunc(stall, l.cancel)
		}
		if !accepted {
			_, _ = stream.Header() // returns when the server accepted the stream, or it ended
			close(l.accepted)
			accepted = true
		}
		resp, err := stream.Recv()
		// Stop is false once the timer fired: the stream was cancelled for its silence (a
		// message that raced it is dropped; the cursor has not moved past it).
		if timer != nil && !timer.Stop() {
			l.err = errStalled
			return
		}
		if err != nil {
			l.err, l.trailer = err, stream.Trailer()
			return
		}
		select {
		case l.msgs <- resp:
		case <-l.ctx.Done():
			l.err = l.ctx.Err()
			return
		}
	}
}
