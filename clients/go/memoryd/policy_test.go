package memoryd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
)

// policy is clients/conformance/policy.json: what every memoryd client does the same way.
type policy struct {
	DeadlineSeconds float64 `json:"deadline_seconds"`
	Retry           struct {
		Codes                 []string `json:"codes"`
		MaxAttempts           int      `json:"max_attempts"`
		InitialBackoffSeconds float64  `json:"initial_backoff_seconds"`
		MaxBackoffSeconds     float64  `json:"max_backoff_seconds"`
		Multiplier            float64  `json:"multiplier"`
		Jitter                float64  `json:"jitter"`
	} `json:"retry"`
	Methods map[string]struct {
		Retry string `json:"retry"`
	} `json:"methods"`
	PageIterators []string `json:"page_iterators"`
	Watch         struct {
		HeartbeatSeconds float64 `json:"heartbeat_seconds"`
		StallFactor      int     `json:"stall_factor"`
	} `json:"watch"`
	Keepalive struct {
		TimeSeconds                  float64 `json:"time_seconds"`
		TimeoutSeconds               float64 `json:"timeout_seconds"`
		PermitWithoutCalls           bool    `json:"permit_without_calls"`
		ServerMinPingIntervalSeconds float64 `json:"server_min_ping_interval_seconds"`
	} `json:"keepalive"`
}

func readPolicy(t *testing.T) policy {
	t.Helper()
	path := filepath.Join("..", "..", "conformance", "policy.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the shared client policy is read from the repository: %v", err)
	}
	var p policy
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func TestKeepaliveFollowsThePolicy(t *testing.T) {
	k := readPolicy(t).Keepalive
	want := keepalive.ClientParameters{Time: seconds(k.TimeSeconds), Timeout: seconds(k.TimeoutSeconds),
		PermitWithoutStream: k.PermitWithoutCalls}
	if got := DefaultKeepalive(); got != want {
		t.Errorf("DefaultKeepalive() = %+v, policy %+v", got, want)
	}
	if o := buildOptions(nil); o.keepalive != want {
		t.Errorf("a Client dials with keepalive %+v, not the policy's %+v", o.keepalive, want)
	}
	off := keepalive.ClientParameters{}
	if o := buildOptions([]Option{WithKeepalive(off)}); o.keepalive != off {
		t.Errorf("WithKeepalive is not applied: %+v", o.keepalive)
	}
}

func TestConstantsFollowThePolicy(t *testing.T) {
	p := readPolicy(t)
	if DefaultTimeout != seconds(p.DeadlineSeconds) {
		t.Errorf("DefaultTimeout %v, policy %vs", DefaultTimeout, p.DeadlineSeconds)
	}
	want := RetryPolicy{MaxAttempts: p.Retry.MaxAttempts, InitialBackoff: seconds(p.Retry.InitialBackoffSeconds),
		MaxBackoff: seconds(p.Retry.MaxBackoffSeconds), Multiplier: p.Retry.Multiplier, Jitter: p.Retry.Jitter}
	if got := DefaultRetryPolicy(); got != want {
		t.Errorf("DefaultRetryPolicy() = %+v, policy %+v", got, want)
	}
	var names []string
	for _, c := range retryCodes {
		names = append(names, CodeName(c))
	}
	if !slices.Equal(names, p.Retry.Codes) {
		t.Errorf("retried codes %v, policy %v", names, p.Retry.Codes)
	}
	if o := buildOptions(nil); o.timeout != DefaultTimeout || o.retry != DefaultRetryPolicy() {
		t.Errorf("a Client's defaults are not the policy's: %v %+v", o.timeout, o.retry)
	}
	if DefaultHeartbeatInterval != seconds(p.Watch.HeartbeatSeconds) || WatchStallFactor != p.Watch.StallFactor {
		t.Errorf("watch heartbeat %v and stall factor %d, policy %vs and %d", DefaultHeartbeatInterval,
			WatchStallFactor, p.Watch.HeartbeatSeconds, p.Watch.StallFactor)
	}
	if o := buildOptions(nil); o.heartbeat != DefaultHeartbeatInterval {
		t.Errorf("a Client's heartbeat interval is %v, not the policy's", o.heartbeat)
	}
}

// tokenAdminMethods are the operators' RPCs, which the client does not wrap.
func tokenAdminMethods() []string {
	var out []string
	svc := pb.File_memoryd_v1_token_admin_service_proto.Services().Get(0)
	for j := 0; j < svc.Methods().Len(); j++ {
		out = append(out, string(svc.FullName())+"/"+string(svc.Methods().Get(j).Name()))
	}
	return out
}

// contractMethods are the contract's RPCs the client wraps, as "memoryd.v1.Service/Method".
func contractMethods() []string {
	var out []string
	for _, file := range []protoreflect.FileDescriptor{pb.File_memoryd_v1_memory_service_proto,
		pb.File_memoryd_v1_view_admin_service_proto} {
		for i := 0; i < file.Services().Len(); i++ {
			svc := file.Services().Get(i)
			for j := 0; j < svc.Methods().Len(); j++ {
				out = append(out, string(svc.FullName())+"/"+string(svc.Methods().Get(j).Name()))
			}
		}
	}
	return out
}

func TestEveryMethodOfTheClientFollowsThePolicysRetryRule(t *testing.T) {
	p := readPolicy(t)
	client := reflect.TypeFor[*Client]()
	methods := contractMethods()
	for _, name := range methods {
		rpc := name[strings.LastIndex(name, "/")+1:]
		if _, ok := client.MethodByName(rpc); !ok {
			t.Errorf("the contract's %s has no Client method", name)
		}
		rule, ok := p.Methods[name]
		if !ok {
			t.Errorf("policy.json has no rule for %s", name)
		}
		if got := retryRules["/"+name]; string(got) != rule.Retry {
			t.Errorf("%s: the client retries %q, the policy says %q", name, got, rule.Retry)
		}
	}
	// TokenAdminService is for operators (memoryd token issue); this client does not wrap it.
	contract := append(contractMethods(), tokenAdminMethods()...)
	for name := range p.Methods {
		if !slices.Contains(contract, name) {
			t.Errorf("policy.json names %s, which the contract does not have", name)
		}
	}
	if len(retryRules) != len(methods) {
		t.Errorf("the retry table has %d entries for %d methods", len(retryRules), len(methods))
	}
}

func TestRetryRulesDecideOnTheRequest(t *testing.T) {
	for _, tc := range []struct {
		method string
		req    any
		want   bool
	}{
		{pb.MemoryService_Write_FullMethodName, &pb.WriteRequest{}, true},
		{pb.MemoryService_ResolveConflict_FullMethodName, &pb.ResolveConflictRequest{}, false},
		{pb.MemoryService_ImportMemories_FullMethodName, &pb.ImportMemoriesRequest{}, false},
		{pb.ViewAdminService_PutView_FullMethodName, &pb.PutViewRequest{}, true},
		{pb.ViewAdminService_PutView_FullMethodName, &pb.PutViewRequest{ExpectedVersion: 3}, false},
		{pb.MemoryService_EndSession_FullMethodName, &pb.EndSessionRequest{}, true},
		// A Watch is resumed from its cursor by the Watcher, never replayed as a call.
		{pb.MemoryService_Watch_FullMethodName, &pb.WatchRequest{}, false},
		{"/memoryd.v1.MemoryService/NotInTheContract", &pb.RecallRequest{}, false},
	} {
		if got := mayRetry(tc.method, tc.req); got != tc.want {
			t.Errorf("mayRetry(%s, %v) = %v", tc.method, tc.req, got)
		}
	}
}

func TestThePolicysPageIteratorsExist(t *testing.T) {
	iterators := map[string]any{
		"memoryd.v1.MemoryService/MemoryView":   (*Client).Memories,
		"memoryd.v1.ViewAdminService/ListViews": (*Client).Views,
	}
	p := readPolicy(t)
	for _, name := range p.PageIterators {
		if iterators[name] == nil {
			t.Errorf("policy.json wants a page iterator over %s", name)
		}
	}
	if len(iterators) != len(p.PageIterators) {
		t.Errorf("iterators %v, policy %v", iterators, p.PageIterators)
	}
}
