package memoryd

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

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
	keys      []string
	deadlines []bool
}

func (s *scripted) next(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	md, _ := metadata.FromIncomingContext(ctx)
	s.auth = append(s.auth, md.Get("authorization"))
	_, has := ctx.Deadline()
	s.deadlines = append(s.deadlines, has)
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

func (s *scripted) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.auth)
}

func start(t *testing.T, srv *scripted, opts ...Option) *Client {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	server := grpc.NewServer()
	pb.RegisterMemoryServiceServer(server, srv)
	pb.RegisterViewAdminServiceServer(server, srv)
	go func() { _ = server.Serve(lis) }()
	t.Cleanup(server.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := New(conn, append([]Option{WithRetry(3, time.Millisecond, 4*time.Millisecond)}, opts...)...)
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

func TestDefaultDeadlineOnlyWhenTheContextHasNone(t *testing.T) {
	srv := &scripted{}
	c := start(t, srv, WithTimeout(0))
	if _, err := c.Recall(context.Background(), &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	c = start(t, srv)
	if _, err := c.Recall(context.Background(), &pb.RecallRequest{}); err != nil {
		t.Fatal(err)
	}
	if srv.deadlines[0] || !srv.deadlines[1] {
		t.Fatalf("deadlines seen: %v", srv.deadlines)
	}
}

func TestCancelledContextStopsRetrying(t *testing.T) {
	srv := &scripted{errs: []error{unavailable(), unavailable(), unavailable()}}
	c := start(t, srv, WithRetry(10, time.Hour, time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Recall(ctx, &pb.RecallRequest{})
	if status.Code(err) != codes.Unavailable || srv.calls() != 1 {
		t.Fatalf("want the UNAVAILABLE after one attempt, got %v after %d", err, srv.calls())
	}
}

func TestBackoffIsExponentialCappedAndJittered(t *testing.T) {
	o := buildOptions([]Option{WithRetry(5, 100*time.Millisecond, time.Second)})
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 9: time.Second} {
		for i := 0; i < 50; i++ {
			if got := o.backoff(n); got < want/2 || got > want {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, got, want/2, want)
			}
		}
	}
}

func TestNilWriteRequest(t *testing.T) {
	c := start(t, &scripted{})
	if _, err := c.Write(context.Background(), nil); err == nil {
		t.Fatal("want an error for a nil request")
	}
}
