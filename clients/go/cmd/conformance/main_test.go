package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestLookupFollowsTheReadmePaths(t *testing.T) {
	doc := decode(t, `{"results":[{"memoryId":"a","version":"2"},{"memoryId":"b"}],"receipt":{"verified":true}}`)
	for path, want := range map[string]any{
		"results.length":      float64(2),
		"results[1].memoryId": "b",
		"results[0].version":  "2",
		"receipt.verified":    true,
		"memories.length":     float64(0),
		"results[5].memoryId": nil,
		"view.agent":          nil,
	} {
		got, err := lookup(doc, path)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %v (%v), want %v", path, got, err, want)
		}
	}
}

func TestSubstituteReplacesPlaceholdersAndReportsUnknownOnes(t *testing.T) {
	values := map[string]any{"subject": "s-1", "n": float64(3)}
	got, err := substitute(decode(t, `{"subject":"${subject}","items":[{"text":"for ${subject}"}],"topK":"${n}"}`), values)
	if err != nil || !reflect.DeepEqual(got, decode(t, `{"subject":"s-1","items":[{"text":"for s-1"}],"topK":3}`)) {
		t.Fatalf("got %v (%v)", got, err)
	}
	if _, err := substitute("${missing}", values); err == nil {
		t.Fatal("want an error for an unknown name")
	}
}

func TestFieldsWithinReadsAMessageFieldAsOneElement(t *testing.T) {
	doc := decode(t, `{"change":{"kind":"MEMORY_CHANGE_KIND_CREATED","memory":{"text":"t","key":"k"}}}`)
	memory, _ := lookup(doc, "change.memory")
	if got := elements(memory); len(got) != 1 || !reflect.DeepEqual(got[0], decode(t, `{"text":"t","key":"k"}`)) {
		t.Fatalf("change.memory: %v", got)
	}
	list, _ := lookup(decode(t, `{"memories":[{"text":"a"},{"text":"b"}]}`), "memories")
	if got := elements(list); len(got) != 2 {
		t.Fatalf("memories: %v", got)
	}
	if got := elements(nil); got != nil {
		t.Fatalf("an absent field has no elements: %v", got)
	}
}
