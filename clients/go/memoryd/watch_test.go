package memoryd

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
)

// watchLog is an in-process Watch server over a log of events "c1", "c2", ...: a stream from
// cursor "cN" sends the events after N, so a client that resumes wrongly sees a gap or a
// repeat. serve decides, per stream (0 for the first), how the stream behaves after it sent
// what it sends.
type watchLog struct {
	pb.UnimplementedMemoryServiceServer
	events []*pb.WatchResponse
	// serve returns how many events stream n sends before it ends with the returned error
	// (nil: ends without one; errHang: stays silent until the client goes away).
	serve func(n int) (send int, end error)

	mu          sync.Mutex
	cursors     []string   // the cursor of each request
	auth        [][]string // the authorization of each request
	traces      []string   // the traceparent of each request
	hasDeadline []bool
}

var errHang = errors.New("hang")

func event(n int, heartbeat bool) *pb.WatchResponse {
	cursor := "c" + strconv.Itoa(n)
	if heartbeat {
		return &pb.WatchResponse{Cursor: cursor, Event: &pb.WatchResponse_Heartbeat{Heartbeat: &pb.WatchHeartbeat{}}}
	}
	return &pb.WatchResponse{Cursor: cursor, Event: &pb.WatchResponse_Change{Change: &pb.MemoryChange{
		Kind: pb.MemoryChangeKind_MEMORY_CHANGE_KIND_CREATED, Memory: &pb.Memory{Text: "memory " + cursor}}}}
}

func (s *watchLog) Watch(req *pb.WatchRequest, stream grpc.ServerStreamingServer[pb.WatchResponse]) error {
	ctx := stream.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	_, deadline := ctx.Deadline()
	s.mu.Lock()
	n := len(s.cursors)
	s.cursors = append(s.cursors, req.GetCursor())
	s.auth = append(s.auth, md.Get("authorization"))
	s.traces = append(s.traces, strings.Join(md.Get("traceparent"), ","))
	s.hasDeadline = append(s.hasDeadline, deadline)
	s.mu.Unlock()
	from := 0
	if req.GetCursor() != "" {
		from, _ = strconv.Atoi(strings.TrimPrefix(req.GetCursor(), "c"))
	}
	send, end := s.serve(n)
	for _, e := range s.events[min(from, len(s.events)):min(from+send, len(s.events))] {
		if err := stream.Send(e); err != nil {
			return err
		}
	}
	if errors.Is(end, errHang) {
		<-ctx.Done()
		return ctx.Err()
	}
	return end
}

func (s *watchLog) requests() (cursors []string, auth [][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.cursors...), append([][]string(nil), s.auth...)
}

// startWatch serves s on loopback and returns a client with a fast backoff.
func startWatch(t *testing.T, s *watchLog, opts ...Option) *Client {
	t.Helper()
	return dialFast(t, listen(t, func(server *grpc.Server) { pb.RegisterMemoryServiceServer(server, s) }), opts...)
}

// texts reads n changes and returns their texts.
func texts(t *testing.T, w *Watcher, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []string
	for range n {
		resp, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", out, err)
		}
		out = append(out, resp.GetChange().GetMemory().GetText())
	}
	return out
}

func TestTheWatcherResumesFromTheLastCursorWithNoLossAndNoRepeat(t *testing.T) {
	// c3 is a heartbeat: it moves the cursor but is not returned.
	log := &watchLog{events: []*pb.WatchResponse{event(1, false), event(2, false), event(3, true), event(4, false),
		event(5, false), event(6, false)}}
	log.serve = func(n int) (int, error) {
		switch n {
		case 0:
			return 3, status.Error(codes.Unavailable, "server restarting") // after c1, c2 and the heartbeat c3
		case 1:
			return 1, nil // c4, then the stream ends without a status
		case 2:
			return 0, status.Error(codes.Unavailable, "still down") // nothing: the cursor stays c4
		default:
			return 99, errHang
		}
	}
	tokens := 0
	c := startWatch(t, log, WithTokenProvider(func(context.Context) (string, error) {
		tokens++
		return "tok-" + strconv.Itoa(tokens), nil
	}))
	w, err := c.Watch(context.Background(), &pb.WatchRequest{Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got := texts(t, w, 5)
	want := []string{"memory c1", "memory c2", "memory c4", "memory c5", "memory c6"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("changes %v, want %v", got, want)
	}
	cursors, auth := log.requests()
	if strings.Join(cursors, ",") != ",c3,c4,c4" {
		t.Fatalf("the stream was opened with cursors %q, want from the start, then after c3, c4, c4", cursors)
	}
	for i, a := range auth {
		if len(a) != 1 || a[0] != "Bearer tok-"+strconv.Itoa(i+1) {
			t.Fatalf("open %d carried %v: the token provider is asked before every open", i, a)
		}
	}
	if w.Cursor() != "c6" {
		t.Fatalf("Cursor() = %q, want the last message's c6", w.Cursor())
	}
	for i, has := range log.hasDeadline {
		if has {
			t.Fatalf("open %d had a deadline: a watch has none", i)
		}
	}
}

func TestEveryOpenCarriesTheTraceContextOfTheSpanThatWatched(t *testing.T) {
	log := &watchLog{events: []*pb.WatchResponse{event(1, false), event(2, false)}}
	log.serve = func(n int) (int, error) {
		if n == 0 {
			return 1, status.Error(codes.Unavailable, "restarting")
		}
		return 1, errHang
	}
	c := startWatch(t, log)
	w, err := c.Watch(spanContext(t), &pb.WatchRequest{Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	texts(t, w, 2)
	log.mu.Lock()
	defer log.mu.Unlock()
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if len(log.traces) != 2 || log.traces[0] != want || log.traces[1] != want {
		t.Fatalf("traceparents %q, want the span's on the open and the reopen", log.traces)
	}
}

func TestTheWatcherOpensAStalledStreamAgain(t *testing.T) {
	log := &watchLog{events: []*pb.WatchResponse{event(1, false), event(2, false)}}
	log.serve = func(int) (int, error) { return 1, errHang } // one event, then silence on every stream
	c := startWatch(t, log, WithHeartbeatInterval(50*time.Millisecond))
	w, err := c.Watch(context.Background(), &pb.WatchRequest{Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := texts(t, w, 2); strings.Join(got, ",") != "memory c1,memory c2" {
		t.Fatalf("changes %v", got)
	}
	if cursors, _ := log.requests(); len(cursors) < 2 || cursors[len(cursors)-1] != "c1" {
		t.Fatalf("cursors %q: the silent stream was not opened again after c1", cursors)
	}
}

func TestHeartbeatsAreReturnedOnlyWhenAskedFor(t *testing.T) {
	log := &watchLog{events: []*pb.WatchResponse{event(1, true), event(2, false)},
		serve: func(int) (int, error) { return 2, errHang }}
	c := startWatch(t, log)
	w, err := c.Watch(context.Background(), &pb.WatchRequest{Subject: "alice"}, WithHeartbeats())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, err := w.Next(ctx)
	if err != nil || first.GetHeartbeat() == nil || first.GetCursor() != "c1" {
		t.Fatalf("want the heartbeat c1, got %v, %v", first, err)
	}
	if second, err := w.Next(ctx); err != nil || second.GetChange() == nil {
		t.Fatalf("want the change c2, got %v, %v", second, err)
	}
}

func cursorExpired(t *testing.T) error {
	t.Helper()
	st, err := status.New(codes.FailedPrecondition, "the cursor is older than the change log").WithDetails(
		&errdetails.ErrorInfo{Reason: "CURSOR_EXPIRED", Domain: "memoryd"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestAnErrorOtherThanUnavailableEndsTheWatchWithATypedError(t *testing.T) {
	log := &watchLog{events: []*pb.WatchResponse{event(1, false)}}
	log.serve = func(n int) (int, error) {
		if n == 0 {
			return 1, status.Error(codes.Unavailable, "restarting")
		}
		return 0, cursorExpired(t)
	}
	c := startWatch(t, log)
	w, err := c.Watch(context.Background(), &pb.WatchRequest{Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	texts(t, w, 1)
	for range 2 { // the error, then the same error: the watch has ended
		_, err := w.Next(context.Background())
		var merr *Error
		if !errors.As(err, &merr) || merr.Code != codes.FailedPrecondition || merr.Reason != "CURSOR_EXPIRED" {
			t.Fatalf("want FAILED_PRECONDITION CURSOR_EXPIRED, got %v", err)
		}
	}
	if cursors, _ := log.requests(); len(cursors) != 2 {
		t.Fatalf("opened %d times: an expired cursor is not retried", len(cursors))
	}
}

func TestReopensWaitThePolicysBackoffCountedFromTheLastMessage(t *testing.T) {
	var waits []time.Duration
	log := &watchLog{events: []*pb.WatchResponse{event(1, false), event(2, false)}}
	log.serve = func(n int) (int, error) {
		switch n {
		case 0, 1:
			return 0, status.Error(codes.Unavailable, "down") // two failed opens in a row
		case 2:
			return 1, status.Error(codes.Unavailable, "down again") // c1, then a failure
		default:
			return 1, errHang
		}
	}
	c := startWatch(t, log, recordSleeps(&waits))
	w, err := c.Watch(context.Background(), &pb.WatchRequest{Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	texts(t, w, 2)
	// startWatch's policy: ceilings 1 ms, 2 ms, 4 ms; the jitter keeps each wait in [ceiling/2, ceiling].
	ceilings := []time.Duration{time.Millisecond, 2 * time.Millisecond, time.Millisecond}
	if len(waits) != len(ceilings) {
		t.Fatalf("waits %v, want one before each of %d reopens", waits, len(ceilings))
	}
	for i, w := range waits {
		if w > ceilings[i] || w < ceilings[i]/2 {
			t.Fatalf("wait %d is %v, want within [%v, %v] (the count restarts after a message)", i, w, ceilings[i]/2, ceilings[i])
		}
	}
}

func TestNextsContextBoundsTheWaitAndCloseEndsTheWatch(t *testing.T) {
	log := &watchLog{events: []*pb.WatchResponse{event(1, false)}, serve: func(int) (int, error) { return 0, errHang }}
	c := startWatch(t, log)
	w, err := c.Watch(context.Background(), &pb.WatchRequest{Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := w.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the wait's deadline, got %v", err)
	}
	if cursors, _ := log.requests(); len(cursors) != 1 {
		t.Fatalf("opened %d times: the end of a wait does not end the stream", len(cursors))
	}
	done := make(chan error, 1)
	go func() { _, err := w.Next(context.Background()); done <- err }()
	_ = w.Close()
	if err := <-done; !errors.Is(err, ErrWatchClosed) {
		t.Fatalf("a Next waiting when Close was called returned %v", err)
	}
	if _, err := w.Next(context.Background()); !errors.Is(err, ErrWatchClosed) {
		t.Fatalf("Next after Close returned %v", err)
	}
}

func TestANilWatchRequestIsRefused(t *testing.T) {
	c := startWatch(t, &watchLog{})
	if _, err := c.Watch(context.Background(), nil); !errors.Is(err, errNilRequest) {
		t.Fatalf("got %v", err)
	}
}

// relay forwards TCP connections to a backend; freeze makes the connections open at that time
// silent in both directions without closing them, as a half-open connection is; drop closes
// them, as a server going away does. New connections are forwarded either way.
type relay struct {
	lis   net.Listener
	mu    sync.Mutex
	open  []*atomic.Bool
	conns []net.Conn
}

func startRelay(t *testing.T, backend string) *relay {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{lis: lis}
	t.Cleanup(func() { _ = lis.Close() })
	go func() {
		for {
			client, err := lis.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", backend)
			if err != nil {
				_ = client.Close()
				continue
			}
			t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
			frozen := &atomic.Bool{}
			r.mu.Lock()
			r.open = append(r.open, frozen)
			r.conns = append(r.conns, client, server)
			r.mu.Unlock()
			go pipe(client, server, frozen)
			go pipe(server, client, frozen)
		}
	}()
	return r
}

// pipe copies src to dst until either closes, dropping everything once frozen.
func pipe(src, dst net.Conn, frozen *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if frozen.Load() {
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// drop closes every connection open now and returns how many there were.
func (r *relay) drop() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	n := len(r.conns) / 2
	r.conns, r.open = nil, nil
	return n
}

func (r *relay) freeze() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.open {
		f.Store(true)
	}
	return len(r.open)
}

func TestAStreamSilentOnAHalfOpenConnectionResumesOnANewOne(t *testing.T) {
	log := &watchLog{events: []*pb.WatchResponse{event(1, false), event(2, false)}}
	log.serve = func(int) (int, error) { return 1, errHang }
	r := startRelay(t, listen(t, func(server *grpc.Server) { pb.RegisterMemoryServiceServer(server, log) }))
	c := dialFast(t, r.lis.Addr().String(), WithHeartbeatInterval(200*time.Millisecond))
	w, err := c.Watch(context.Background(), &pb.WatchRequest{Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got := texts(t, w, 1); got[0] != "memory c1" {
		t.Fatalf("first change %v", got)
	}
	// Every connection open now goes silent (more than one if a slow start already looked silent).
	if n := r.freeze(); n < 1 {
		t.Fatalf("%d connections through the relay before the freeze, want the client's", n)
	}
	// The frozen connection never fails by itself: c2 comes only over a new connection.
	if got := texts(t, w, 1); got[0] != "memory c2" {
		t.Fatalf("after the freeze %v", got)
	}
}

func TestShortWaitsStillReachTheReopen(t *testing.T) {
	log := &watchLog{events: []*pb.WatchResponse{event(1, false)}}
	log.serve = func(n int) (int, error) {
		if n == 0 { // the server asks for 300 ms before the next try
			return 0, unavailableRetryAfter(t, 300*time.Millisecond)
		}
		return 1, errHang
	}
	c := startWatch(t, log)
	w, err := c.Watch(context.Background(), &pb.WatchRequest{Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Each wait is shorter than the server's delay: the backoff must carry over from one to the next.
	for tries := 0; ; tries++ {
		short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		resp, err := w.Next(short)
		cancel()
		if err == nil {
			if resp.GetCursor() != "c1" {
				t.Fatalf("got %v", resp)
			}
			return
		}
		if !errors.Is(err, context.DeadlineExceeded) || tries == 200 {
			t.Fatalf("after %d short waits: %v", tries, err)
		}
	}
}
