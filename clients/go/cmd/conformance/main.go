// Command conformance runs the shared memoryd conformance scenario (clients/conformance) with
// the Go client: conformance SCENARIO CONFIG. It prints one line per step, "ok <n> <name>" or
// "FAIL <n> <name>: <why>", and exits 0 only if every step passed.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/memoryd/memoryd/clients/go/gen/memoryd/v1"
	"github.com/memoryd/memoryd/clients/go/memoryd"
)

type step struct {
	Name    string            `json:"name"`
	Caller  string            `json:"caller"`
	RPC     string            `json:"rpc"`
	Request any               `json:"request"`
	Expect  expect            `json:"expect"`
	Save    map[string]string `json:"save"`
	// A Watch step: open a watch under a name, read its next change, see none for Seconds, or
	// close it.
	Open    string  `json:"open"`
	Next    string  `json:"next"`
	None    string  `json:"none"`
	Seconds float64 `json:"seconds"`
	Close   string  `json:"close"`
}

// changeWithin is how long a "next" step waits for a change, openWithin how long an "open" step
// waits for the server to accept the stream before it goes on.
const (
	changeWithin = 15 * time.Second
	openWithin   = 2 * time.Second
)

type expect struct {
	Code         string              `json:"code"`
	Reason       *string             `json:"reason"`
	Violations   []string            `json:"violations"`
	Equals       map[string]any      `json:"equals"`
	Texts        map[string][]string `json:"texts"`
	FieldsWithin map[string][]string `json:"fields_within"`
}

type config struct {
	Target string            `json:"target"`
	Tokens map[string]string `json:"tokens"`
	Vars   map[string]any    `json:"vars"`
}

type rpcFunc func(context.Context, *memoryd.Client, []byte) (proto.Message, error)

// call decodes the request JSON into the method's request type and calls the client method.
func call[Req proto.Message, Resp proto.Message](newReq func() Req,
	method func(*memoryd.Client, context.Context, Req, ...grpc.CallOption) (Resp, error)) rpcFunc {
	return func(ctx context.Context, c *memoryd.Client, body []byte) (proto.Message, error) {
		req := newReq()
		if err := protojson.Unmarshal(body, req); err != nil {
			return nil, fmt.Errorf("request is not a valid %T: %w", req, err)
		}
		return method(c, ctx, req)
	}
}

var rpcs = map[string]rpcFunc{
	"Write":            call(func() *pb.WriteRequest { return &pb.WriteRequest{} }, (*memoryd.Client).Write),
	"Recall":           call(func() *pb.RecallRequest { return &pb.RecallRequest{} }, (*memoryd.Client).Recall),
	"Erase":            call(func() *pb.EraseRequest { return &pb.EraseRequest{} }, (*memoryd.Client).Erase),
	"MemoryView":       call(func() *pb.MemoryViewRequest { return &pb.MemoryViewRequest{} }, (*memoryd.Client).MemoryView),
	"GetHistory":       call(func() *pb.GetHistoryRequest { return &pb.GetHistoryRequest{} }, (*memoryd.Client).GetHistory),
	"GetExtractionJob": call(func() *pb.GetExtractionJobRequest { return &pb.GetExtractionJobRequest{} }, (*memoryd.Client).GetExtractionJob),
	"ResolveConflict":  call(func() *pb.ResolveConflictRequest { return &pb.ResolveConflictRequest{} }, (*memoryd.Client).ResolveConflict),
	"ExportMemories":   call(func() *pb.ExportMemoriesRequest { return &pb.ExportMemoriesRequest{} }, (*memoryd.Client).ExportMemories),
	"ImportMemories":   call(func() *pb.ImportMemoriesRequest { return &pb.ImportMemoriesRequest{} }, (*memoryd.Client).ImportMemories),
	"EndSession":       call(func() *pb.EndSessionRequest { return &pb.EndSessionRequest{} }, (*memoryd.Client).EndSession),
	"ResumeSession":    call(func() *pb.ResumeSessionRequest { return &pb.ResumeSessionRequest{} }, (*memoryd.Client).ResumeSession),
}

var placeholder = regexp.MustCompile(`\$\{([^}]*)\}`)

// substitute replaces every ${name} in the strings of v; a string that is exactly one
// placeholder takes the value itself (which may be a number or a bool).
func substitute(v any, values map[string]any) (any, error) {
	switch v := v.(type) {
	case string:
		if m := placeholder.FindStringSubmatch(v); m != nil && m[0] == v {
			val, ok := values[m[1]]
			if !ok {
				return nil, fmt.Errorf("no value for ${%s}", m[1])
			}
			return val, nil
		}
		var missing error
		out := placeholder.ReplaceAllStringFunc(v, func(s string) string {
			name := s[2 : len(s)-1]
			val, ok := values[name]
			if !ok {
				missing = fmt.Errorf("no value for ${%s}", name)
				return s
			}
			if str, ok := val.(string); ok {
				return str
			}
			b, _ := json.Marshal(val)
			return string(b)
		})
		return out, missing
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			s, err := substitute(e, values)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			s, err := substitute(e, values)
			if err != nil {
				return nil, err
			}
			out[k] = s
		}
		return out, nil
	default:
		return v, nil
	}
}

var segment = regexp.MustCompile(`^([^\[\]]*)((?:\[\d+\])*)$`)
var index = regexp.MustCompile(`\[(\d+)\]`)

// lookup reads a dot-separated path with [i] indices from decoded JSON; an absent field is
// nil, and a final "length" of an array (or of an absent field) is its number of elements.
func lookup(doc any, path string) (any, error) {
	parts := strings.Split(path, ".")
	cur := doc
	for i, part := range parts {
		if part == "length" && i == len(parts)-1 {
			switch c := cur.(type) {
			case []any:
				return float64(len(c)), nil
			case nil:
				return float64(0), nil
			}
		}
		m := segment.FindStringSubmatch(part)
		if m == nil {
			return nil, fmt.Errorf("bad path %q", path)
		}
		if m[1] != "" {
			switch c := cur.(type) {
			case map[string]any:
				cur = c[m[1]]
			case nil:
				cur = nil
			default:
				return nil, fmt.Errorf("%s: %q is not an object", path, m[1])
			}
		}
		for _, ix := range index.FindAllStringSubmatch(m[2], -1) {
			n, _ := strconv.Atoi(ix[1])
			arr, ok := cur.([]any)
			if !ok && cur != nil {
				return nil, fmt.Errorf("%s: %q is not a list", path, part)
			}
			if n >= len(arr) {
				cur = nil
			} else {
				cur = arr[n]
			}
		}
	}
	return cur, nil
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func details(err error) (reason string, violations []string) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			reason = d.GetReason()
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				violations = append(violations, v.GetField())
			}
		}
	}
	return reason, violations
}

func set(xs []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

type runner struct {
	clients map[string]*memoryd.Client
	values  map[string]any
	watches map[string]*memoryd.Watcher
}

// run executes one step and returns why it failed ("" when it passed).
func (r *runner) run(s step) string {
	switch {
	case s.Next != "":
		return r.next(s)
	case s.None != "":
		return r.none(s)
	case s.Close != "":
		return r.close(s)
	case s.Open != "":
		return r.open(s)
	}
	c, ok := r.clients[s.Caller]
	if !ok {
		return fmt.Sprintf("unknown caller %q", s.Caller)
	}
	rpc, ok := rpcs[s.RPC]
	if !ok {
		return fmt.Sprintf("unknown rpc %q", s.RPC)
	}
	body, err := r.request(s)
	if err != nil {
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	resp, err := rpc(ctx, c, body)
	return r.check(s, resp, err)
}

// request is the step's request JSON with its placeholders replaced.
func (r *runner) request(s step) ([]byte, error) {
	request, err := substitute(s.Request, r.values)
	if err != nil {
		return nil, err
	}
	return json.Marshal(request)
}

// open opens the client's resuming watch and waits (a little) until the server accepted it;
// with an expected error it reads the first message, where a stream's error arrives, and
// checks it.
func (r *runner) open(s step) string {
	c, ok := r.clients[s.Caller]
	if !ok {
		return fmt.Sprintf("unknown caller %q", s.Caller)
	}
	if s.RPC != "Watch" {
		return fmt.Sprintf("an open step calls Watch, not %q", s.RPC)
	}
	if _, open := r.watches[s.Open]; open {
		return fmt.Sprintf("watch %q is already open", s.Open)
	}
	body, err := r.request(s)
	if err != nil {
		return err.Error()
	}
	req := &pb.WatchRequest{}
	if err := protojson.Unmarshal(body, req); err != nil {
		return fmt.Sprintf("request is not a valid WatchRequest: %v", err)
	}
	w, err := c.Watch(context.Background(), req)
	if err != nil {
		return r.check(s, nil, err)
	}
	if s.Expect.Code == "" || s.Expect.Code == "OK" {
		// Once the server accepted the stream, a write in a later step is delivered. A server
		// that sends its headers only with its first message gives no earlier sign: go on.
		accepted, cancel := context.WithTimeout(context.Background(), openWithin)
		defer cancel()
		_ = w.WaitOpen(accepted)
		r.watches[s.Open] = w
		return r.check(s, nil, nil)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), changeWithin)
	defer cancel()
	resp, err := w.Next(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("want %s, got no error within %v", s.Expect.Code, changeWithin)
	}
	return r.check(s, resp, err)
}

// next reads the watch's next change (heartbeats are skipped) and checks it.
func (r *runner) next(s step) string {
	w, ok := r.watches[s.Next]
	if !ok {
		return fmt.Sprintf("no open watch %q", s.Next)
	}
	ctx, cancel := context.WithTimeout(context.Background(), changeWithin)
	defer cancel()
	resp, err := w.Next(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no change within %v", changeWithin)
	}
	return r.check(s, resp, err)
}

// none passes when no change arrives on the watch for the step's seconds.
func (r *runner) none(s step) string {
	w, ok := r.watches[s.None]
	if !ok {
		return fmt.Sprintf("no open watch %q", s.None)
	}
	if s.Seconds <= 0 {
		return "a none step needs seconds > 0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(s.Seconds*float64(time.Second)))
	defer cancel()
	resp, err := w.Next(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return ""
	case err != nil:
		return fmt.Sprintf("want no change, got %v", err)
	default:
		raw, _ := protojson.Marshal(resp)
		return fmt.Sprintf("want no change within %vs, got %s", s.Seconds, raw)
	}
}

func (r *runner) close(s step) string {
	w, ok := r.watches[s.Close]
	if !ok {
		return fmt.Sprintf("no open watch %q", s.Close)
	}
	delete(r.watches, s.Close)
	_ = w.Close()
	return ""
}

// check compares a call's answer, or its error, with the step's expect and saves its values.
func (r *runner) check(s step, resp proto.Message, err error) string {
	got := "OK"
	if err != nil {
		if _, isStatus := status.FromError(err); !isStatus {
			return err.Error()
		}
		got = memoryd.CodeName(status.Code(err))
	}
	want := s.Expect.Code
	if want == "" {
		want = "OK"
	}
	if got != want {
		if err != nil {
			return fmt.Sprintf("want %s, got %s: %s", want, got, status.Convert(err).Message())
		}
		return fmt.Sprintf("want %s, got OK", want)
	}
	if err != nil {
		reason, violations := details(err)
		if s.Expect.Reason != nil && reason != *s.Expect.Reason {
			return fmt.Sprintf("want reason %s, got %q", *s.Expect.Reason, reason)
		}
		if s.Expect.Violations != nil && !reflect.DeepEqual(set(violations), set(s.Expect.Violations)) {
			return fmt.Sprintf("want violations %v, got %v", set(s.Expect.Violations), set(violations))
		}
	}
	var doc any = map[string]any{}
	if resp != nil {
		raw, merr := protojson.MarshalOptions{UseProtoNames: false, EmitUnpopulated: false}.Marshal(resp)
		if merr != nil {
			return "cannot print the response: " + merr.Error()
		}
		if derr := json.NewDecoder(bytes.NewReader(raw)).Decode(&doc); derr != nil {
			return "cannot read the response JSON: " + derr.Error()
		}
	}
	for _, path := range sortedKeys(s.Expect.Equals) {
		expected, serr := substitute(s.Expect.Equals[path], r.values)
		if serr != nil {
			return serr.Error()
		}
		actual, lerr := lookup(doc, path)
		if lerr != nil {
			return lerr.Error()
		}
		if !reflect.DeepEqual(actual, expected) {
			return fmt.Sprintf("%s: want %s, got %s", path, show(expected), show(actual))
		}
	}
	for _, path := range sortedKeys(s.Expect.Texts) {
		items, lerr := lookup(doc, path)
		if lerr != nil {
			return lerr.Error()
		}
		list, _ := items.([]any)
		var texts []string
		for _, item := range list {
			obj, _ := item.(map[string]any)
			text, _ := obj["text"].(string)
			texts = append(texts, text)
		}
		wantTexts := make([]string, 0, len(s.Expect.Texts[path]))
		for _, t := range s.Expect.Texts[path] {
			sub, serr := substitute(t, r.values)
			if serr != nil {
				return serr.Error()
			}
			wantTexts = append(wantTexts, fmt.Sprint(sub))
		}
		sort.Strings(texts)
		sort.Strings(wantTexts)
		if strings.Join(texts, "\x00") != strings.Join(wantTexts, "\x00") || len(texts) != len(wantTexts) {
			return fmt.Sprintf("%s texts: want %s, got %s", path, show(wantTexts), show(texts))
		}
	}
	for _, path := range sortedKeys(s.Expect.FieldsWithin) {
		items, lerr := lookup(doc, path)
		if lerr != nil {
			return lerr.Error()
		}
		allowed := map[string]bool{}
		for _, name := range s.Expect.FieldsWithin[path] {
			allowed[name] = true
		}
		for i, item := range elements(items) {
			obj, _ := item.(map[string]any)
			for name := range obj {
				if !allowed[name] {
					return fmt.Sprintf("%s[%d] carries %q, not in %v", path, i, name, s.Expect.FieldsWithin[path])
				}
			}
		}
	}
	for name, path := range s.Save {
		v, lerr := lookup(doc, path)
		if lerr != nil {
			return lerr.Error()
		}
		r.values[name] = v
	}
	return ""
}

// elements are the items of a repeated field, or the one object of a message field.
func elements(v any) []any {
	switch v := v.(type) {
	case []any:
		return v
	case map[string]any:
		return []any{v}
	default:
		return nil
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func readJSON(path string, into any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: conformance SCENARIO CONFIG")
		os.Exit(2)
	}
	var scenario struct {
		Steps []step `json:"steps"`
	}
	var cfg config
	if err := readJSON(os.Args[1], &scenario); err != nil {
		fmt.Fprintln(os.Stderr, "scenario:", err)
		os.Exit(2)
	}
	if err := readJSON(os.Args[2], &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "config:", err)
		os.Exit(2)
	}
	conn, err := grpc.NewClient(cfg.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(2)
	}
	defer conn.Close()
	r := &runner{clients: map[string]*memoryd.Client{}, values: map[string]any{}, watches: map[string]*memoryd.Watcher{}}
	for name, tok := range cfg.Tokens {
		r.clients[name] = memoryd.New(conn, memoryd.WithToken(tok))
	}
	for k, v := range cfg.Vars {
		r.values[k] = v
	}
	failed := 0
	for n, s := range scenario.Steps {
		if why := r.run(s); why != "" {
			failed++
			fmt.Printf("FAIL %d %s: %s\n", n+1, s.Name, strings.ReplaceAll(why, "\n", " "))
		} else {
			fmt.Printf("ok %d %s\n", n+1, s.Name)
		}
	}
	for _, w := range r.watches {
		_ = w.Close()
	}
	if failed > 0 {
		os.Exit(1)
	}
}
