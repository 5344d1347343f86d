package gwproto

import (
	"net/http/httptest"
	"slices"
	"testing"
)

func TestToken(t *testing.T) {
	// python3: hmac.new(b'percore', b'alice', hashlib.sha256).hexdigest()
	const want = "6288d658b77f4cf6a16a8919455b64cf3189e40e007651d4bb94f5a5667d386b"
	if got := Token("percore", "alice"); got != want {
		t.Fatalf("Token = %s, want %s", got, want)
	}
	for target, ok := range map[string]bool{
		URL("percore", "alice"):                   true,
		URL("percore", "a b&c"):                   true,
		"/ws?user=alice&token=" + want[:63]:       false,
		"/ws?user=alice&token=" + want + "0":      false,
		"/ws?user=bob&token=" + want:              false,
		"/ws?user=&token=" + Token("percore", ""): false,
		"/ws/?user=alice&token=" + want:           false,
	} {
		_, got := Authorized(httptest.NewRequest("GET", target, nil), "percore")
		if got != ok {
			t.Errorf("%s: authorized %v, want %v", target, got, ok)
		}
	}
}

func TestParseCommand(t *testing.T) {
	for in, want := range map[string]string{
		"SUB news":    "OK SUB news",
		"UNSUB news":  "OK UNSUB news",
		"SUB":         "ERR",
		"SUB ":        "ERR",
		"sub news":    "ERR",
		"SUB a b":     "ERR",
		"SUB a\tb":    "ERR",
		"PUBLISH x y": "ERR",
	} {
		cmd, err := ParseCommand([]byte(in))
		got := string(Reply(cmd, err))
		if got != want && !(want == "ERR" && len(got) > 4 && got[:4] == "ERR ") {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	long := make([]byte, MaxTopic+1)
	for i := range long {
		long[i] = 'a'
	}
	if _, err := ParseCommand(append([]byte("SUB "), long...)); err == nil {
		t.Errorf("a topic of %d bytes was taken", len(long))
	}
	if _, err := ParseCommand(append([]byte("SUB "), long[1:]...)); err != nil {
		t.Errorf("a topic of %d bytes: %v", MaxTopic, err)
	}
}

func TestTopics(t *testing.T) {
	var tp Topics[int]
	var s1, s2 Subscription
	Apply(&tp, &s1, 1, Command{Sub: true, Topic: "a"})
	Apply(&tp, &s1, 1, Command{Sub: true, Topic: "a"})
	Apply(&tp, &s1, 1, Command{Sub: true, Topic: "b"})
	Apply(&tp, &s2, 2, Command{Sub: true, Topic: "a"})
	members := func(topic string) []int {
		var m []int
		tp.Each(topic, func(c int) { m = append(m, c) })
		slices.Sort(m)
		return m
	}
	if got := members("a"); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("a: %v", got)
	}
	if !slices.Equal(s1, Subscription{"a", "b"}) {
		t.Errorf("s1 = %v", s1)
	}
	Apply(&tp, &s1, 1, Command{Topic: "a"})
	Apply(&tp, &s1, 1, Command{Topic: "zzz"})
	if got := members("a"); !slices.Equal(got, []int{2}) {
		t.Errorf("a after UNSUB: %v", got)
	}
	Leave(&tp, &s1, 1)
	Leave(&tp, &s2, 2)
	if len(s1) != 0 || len(tp.m) != 0 {
		t.Errorf("after Leave: %v %v", s1, tp.m)
	}
}
