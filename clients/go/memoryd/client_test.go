package memoryd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
)

// scripted is an in-process MemoryService/ViewAdminService: each call pops the next scripted
// error (nil = success) and records what the client sent.
type scripted struct {
	pb.UnimplementedMemoryServiceServer
	pb.UnimplementedViewAdminServiceServer
	mu        sync.Mutex
	errs      []error
	auth      [][]string
	traces    [][]string // traceparent, tracestate of each call
	keys      []string
	deadlines []time.Duration // time left of each call's deadline (0: none)
	pageSize  int             // MemoryView and ListViews pages, over items
	items     int
	tokens    []string // page tokens received
}

func (s *scripted) next(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	md, _ := metadata.FromIncomingContext(ctx)
	s.auth = append(s.auth, md.Get("authorization"))
	s.traces = append(s.traces, append(md.Get("traceparent"), md.Get("tracestate")...))
	var left time.Duration
	if deadline, has := ctx.Deadline(); has {
		left = time.Until(deadline)
	}
	s.deadlines = append(s.deadlines, left)
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-request-id", "trailer-id"))
	if len(s.errs) == 0 {
		return nil
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	return err
}

func (s *scripted) Write(ctx context.Context, req *pb.WriteRequest) (*pb.WriteResponse, error) {
	s.mu.Lock()
	s.keys = append(s.keys, req.GetIdempotencyKey())
	s.mu.Unlock()
	if err := s.next(ctx); err != nil {
		return nil, err
	}
	return &pb.WriteResponse{Results: []*pb.WriteResult{{MemoryId: "m1"}}}, nil
}

func (s *scripted) Recall(ctx context.Context, _ *pb.RecallRequest) (*pb.RecallResponse, error) {
	if err := s.next(ctx); err != nil {
		return nil, err
	}
	return &pb.RecallResponse{}, nil
}

func (s *scripted) GetView(ctx context.Context, req *pb.GetViewRequest) (*pb.GetViewResponse, error) {
	if err := s.next(ctx); err != nil {
		return nil, err
	}
	return &pb.GetViewResponse{View: &pb.View{Agent: req.GetAgent()}}, nil
}

func (s *scripted) ResolveConflict(ctx context.Context, _ *pb.ResolveConflictRequest) (*pb.ResolveConflictResponse, error) {
	if err := s.next(ctx); err != nil {
		return nil, err
	}
	return &pb.ResolveConflictResponse{}, nil
}

func (s *scripted) ImportMemories(ctx context.Context, _ *pb.ImportMemoriesRequest) (*pb.ImportMemoriesResponse, error) {
	if err := s.next(ctx); err != nil {
		return nil, err
	}
	return &pb.ImportMemoriesResponse{}, nil
}

func (s *scripted) PutView(ctx context.Context, req *pb.PutViewRequest) (*pb.PutViewResponse, error) {
	if err := s.next(ctx); err != nil {
		return nil, err
	}
	return &pb.PutViewResponse{View: req.GetView()}, nil
}

// page serves items [offset, offset+pageSize) for a token "offset" (AIP-158: empty at the end).
func (s *scripted) page(ctx context.Context, token string) (from, to int, next string, err error) {
	if err := s.next(ctx); err != nil {
		return 0, 0, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = append(s.tokens, token)
	if token != "" {
		if from, err = strconv.Atoi(token); err != nil {
			return 0, 0, "", status.Error(codes.InvalidArgument, "bad page token")
		}
	}
	to = min(from+s.pageSize, s.items)
	if to < s.items {
		next = strconv.Itoa(to)
	}
	return from, to, next, nil
}

func (s *scripted) MemoryView(ctx context.Context, req *pb.MemoryViewRequest) (*pb.MemoryViewResponse, error) {
	from, to, next, err := s.page(ctx, req.GetPageToken())
	if err != nil {
		return nil, err
	}
	resp := &pb.MemoryViewResponse{NextPageToken: next}
	for i := from; i < to; i++ {
		resp.Memories = append(resp.Memories, &pb.Memory{Id: fmt.Sprintf("m%d", i), Subject: req.GetSubject()})
	}
	return resp, nil
}

func (s *scripted) ListViews(ctx context.Context, req *pb.ListViewsRequest) (*pb.ListViewsResponse, error) {
	from, to, next, err := s.page(ctx, req.GetPageToken())
	if err != nil {
		return nil, err
	}
	resp := &pb.ListViewsResponse{NextPageToken: next}
	for i := from; i < to; i++ {
		resp.Views = append(resp.Views, &pb.View{Agent: fmt.Sprintf("agent-%d", i)})
	}
	return resp, nil
}

func (s *scripted) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.auth)
}

// start serves srv on a loopback TCP port with a real gRPC server and dials it with Dial.
func start(t *testing.T, srv *scripted, opts ...Option) *Client {
	t.Helper()
	return dialFast(t, listen(t, func(server *grpc.Server) {
		pb.RegisterMemoryServiceServer(server, srv)
		pb.RegisterViewAdminServiceServer(server, srv)
	}), opts...)
}

// listen serves what register adds on a loopback TCP port with a real gRPC server.
func listen(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	register(server)
	go func() { _ = server.Serve(lis) }()
	t.Cleanup(server.Stop)
	return lis.Addr().String()
}

// dialFast dials target with Dial and a retry policy of milliseconds.
func dialFast(t *testing.T, target string, opts ...Option) *Client {
	t.Helper()
	fast := RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
		Multiplier: 2, Jitter: 0.5}
	c, err := Dial(target, append([]Option{WithRetryPolicy(fast)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func unavailable() error { return status.Error(codes.Unavailable, "store down") }

func richStatus(t *testing.T) error {
	t.Helper()
	st, err := status.New(codes.InvalidArgument, "bad request").WithDetails(
		&errdetails.ErrorInfo{Reason: "INVALID_REQUEST", Domain: "memoryd", Metadata: map[string]string{"request_id": "req-42"}},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: "subject", Description: "is required"}, {Field: "items[0].text", Description: "is empty"}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestRetriesUnavailableThenSucceeds(t *testing.T) {
	srv := &scripted{errs: []error{unavailable(), unavailable()}}
	c := start(t, srv)
	resp, err := c.Recall(context.Background(), &pb.RecallRequest{Subject: "s"})
	if err != nil || resp == nil {
		t.Fatalf("want success after retries, got %v", err)
	}
	if srv.calls() != 3 {
		t.Fatalf("want 3 attempts, got %d", srv.calls())
	}
}

func TestGivesUpAfterMaxAttempts(t *testing.T) {
	srv := &scripted{errs: []error{unavailable(), unavailable(), unavailable(), unavailable()}}
	c := start(t, srv)
	_, err := c.Recall(context.Background(), &pb.RecallRequest{Subject: "s"})
	var merr *Error
	if !errors.As(err, &merr) || merr.Code != codes.Unavailable || merr.Attempts != 3 || !merr.Retryable() {
		t.Fatalf("want UNAVAILABLE after 3 attempts, got %#v", err)
	}
	if srv.calls() != 3 {
		t.Fatalf("want 3 attempts, got %d", srv.calls())
	}
}

func TestDoesNotRetryOtherCodes(t *testing.T) {
	for _, code := range []codes.Code{codes.Internal, codes.DeadlineExceeded, codes.ResourceExhausted, codes.PermissionDenied} {
		srv := &scripted{errs: []error{status.Error(code, "no"), nil}}
		c := start(t, srv)
		_, err := c.Recall(context.Background(), &pb.RecallRequest{Subject: "s"})
		if status.Code(err) != code || srv.calls() != 1 {
			t.Fatalf("%v: want one attempt and the code back, got %v after %d", code, err, srv.calls())
		}
	}
}

func TestWriteRetriesReuseAGeneratedIdempotencyKey(t *testing.T) {
	srv := &scripted{errs: []error{unavailable()}}
	c := start(t, srv)
	req := &pb.WriteRequest{Subject: "s", Items: []*pb.MemoryDraft{{Text: "x"}}}
	if _, err := c.Write(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(srv.keys) != 2 || srv.keys[0] == "" || srv.keys[0] != srv.keys[1] {
		t.Fatalf("want one generated key on both attempts, got %q", srv.keys)
	}
	if req.GetIdempotencyKey() != "" {
		t.Fatal("the caller's request was modified")
	}
	req.IdempotencyKey = "mine"
	if _, err := c.Write(context.Background(), req); err != nil || srv.keys[2] != "mine" {
		t.Fatalf("want the caller's key kept, got %q (%v)", srv.keys, err)
	}
}

func TestErrorCarriesReasonViolationsAndRequestID(t *testing.T) {
	srv := &scripted{errs: []error{richStatus(t)}}
	c := start(t, srv)
	_, err := c.Write(context.Background(), &pb.WriteRequest{})
	var merr *Error
	if !errors.As(err, &merr) {
		t.Fatalf("want *Error, got %T %v", err, err)
	}
	if merr.Code != codes.InvalidArgument || merr.Reason != "INVALID_REQUEST" || merr.Domain != "memoryd" ||
		merr.RequestID != "req-42" || merr.ReasonCode() != pb.ErrorReason_ERROR_REASON_INVALID_REQUEST {
		t.Fatalf("unexpected error fields: %#v", merr)
	}
	if len(merr.Violations) != 2 || merr.Violations["subject"] != "is required" || merr.Violations["items[0].text"] != "is empty" {
		t.Fatalf("unexpected violations: %v", merr.Violations)
	}
	if st, ok := status.FromError(err); !ok || len(st.Details()) != 2 || st.Code() != codes.InvalidArgument {
		t.Fatalf("status.FromError lost the details: %v", st)
	}
	if merr.Error() != "memoryd: INVALID_ARGUMENT INVALID_REQUEST: bad request (request id req-42)" {
		t.Fatalf("unexpected message %q", merr.Error())
	}
}

func TestRequestIDFallsBackToTrailer(t *testing.T) {
	srv := &scripted{errs: []error{status.Error(codes.NotFound, "gone")}}
	c := start(t, srv)
	_, err := c.GetView(context.Background(), &pb.GetViewRequest{Agent: "a"})
	var merr *Error
	if !errors.As(err, &merr) || merr.RequestID != "trailer-id" || merr.Reason != "" {
		t.Fatalf("want the trailer's request id, got %#v", err)
	}
}

func TestBearerTokenOnEveryCallAndNoneWithoutToken(t *testing.T) {
	srv := &scripted{errs: []error{unavailable()}}
	c := start(t, srv, WithToken("tok"))
	if _, err := c.Recall(context.Background(), &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	for i, a := range srv.auth {
		if len(a) != 1 || a[0] != "Bearer tok" {
			t.Fatalf("attempt %d: authorization %q", i, a)
		}
	}
	anon := &scripted{}
	c = start(t, anon)
	resp, err := c.GetView(context.Background(), &pb.GetViewRequest{Agent: "a"})
	if err != nil || resp.GetView().GetAgent() != "a" || len(anon.auth[0]) != 0 {
		t.Fatalf("want no authorization, got %q (%v)", anon.auth, err)
	}
}

func TestEveryAttemptHasItsOwnDeadlineWithinTheCallers(t *testing.T) {
	srv := &scripted{}
	within := func(got, want time.Duration) bool { return got > want-5*time.Second && got <= want }
	c := start(t, srv)
	if _, err := c.Recall(context.Background(), &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	// A caller's longer deadline bounds the whole call; each attempt still gets 30 s.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if _, err := c.Recall(ctx, &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	// A shorter one wins.
	short, cancelShort := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelShort()
	if _, err := c.Recall(short, &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	// CallTimeout sets this call's per-attempt deadline; WithTimeout(0) sets none.
	if _, err := c.Recall(context.Background(), &pb.RecallRequest{}, CallTimeout(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := start(t, srv, WithTimeout(0)).Recall(context.Background(), &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	d := srv.deadlines
	if !within(d[0], DefaultTimeout) || !within(d[1], DefaultTimeout) || !within(d[2], 10*time.Second) ||
		!within(d[3], 2*time.Minute) || d[4] != 0 {
		t.Fatalf("deadlines seen: %v", d)
	}
}

func TestCancelledContextStopsRetrying(t *testing.T) {
	srv := &scripted{errs: []error{unavailable(), unavailable(), unavailable()}}
	slow := RetryPolicy{MaxAttempts: 10, InitialBackoff: time.Hour, MaxBackoff: time.Hour, Multiplier: 2}
	c := start(t, srv, WithRetryPolicy(slow))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := c.Recall(ctx, &pb.RecallRequest{})
	if status.Code(err) != codes.Unavailable || srv.calls() != 1 {
		t.Fatalf("want the UNAVAILABLE after one attempt, got %v after %d", err, srv.calls())
	}
	if time.Since(began) > time.Second {
		t.Fatalf("waited %v for a backoff the caller's deadline could not cover", time.Since(began))
	}
}

func TestBackoffFollowsTheFormulaWithJitterBelowTheCeiling(t *testing.T) {
	p := DefaultRetryPolicy()
	for n, ceiling := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: 1600 * time.Millisecond, 6: 2 * time.Second, 30: 2 * time.Second} {
		low, high := ceiling, time.Duration(0)
		for i := 0; i < 400; i++ {
			got := p.Backoff(n)
			if got < ceiling/2 || got > ceiling {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", n, got, ceiling/2, ceiling)
			}
			low, high = min(low, got), max(high, got)
		}
		if high-low < ceiling/4 { // uniform over [ceiling/2, ceiling]: 400 draws spread well
			t.Fatalf("Backoff(%d) is not jittered: %v..%v", n, low, high)
		}
	}
	if got := NoRetries().Backoff(3); got != 0 {
		t.Fatalf("NoRetries backoff %v", got)
	}
}

func TestNilWriteRequest(t *testing.T) {
	c := start(t, &scripted{})
	if _, err := c.Write(context.Background(), nil); err == nil {
		t.Fatal("want an error for a nil request")
	}
}
