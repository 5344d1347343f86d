package ws_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/frame/ws"
)

const goodRequest = "GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://example.com\r\nSec-WebSocket-Version: 13\r\n"

func parseReq(t *testing.T, s string) *http1.Request {
	t.Helper()
	r := &http1.Request{}
	ok, err := http1.ParseRequest([]byte(s), r, http1.Limits{})
	if !ok || err != nil {
		t.Fatalf("parse %q: %v %v", s, ok, err)
	}
	return r
}

// TestAcceptKey is RFC 6455 section 1.3's example.
func TestAcceptKey(t *testing.T) {
	if got := ws.AcceptKey([]byte("dGhlIHNhbXBsZSBub25jZQ==")); string(got[:]) != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("accept %s", got)
	}
}

func TestAccept(t *testing.T) {
	cfg := &ws.Config{Protocols: []string{"chat", "superchat"}}
	hs, err := ws.Accept(parseReq(t, goodRequest+"Sec-WebSocket-Protocol: superchat, chat\r\n\r\n"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if hs.Protocol != "chat" {
		t.Fatalf("protocol %q, want the server's first choice", hs.Protocol)
	}
	out := string(ws.AppendAccept(nil, &hs))
	want := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: chat\r\n\r\n"
	if out != want {
		t.Fatalf("response\n%q\nwant\n%q", out, want)
	}
	if hs, _ := ws.Accept(parseReq(t, goodRequest+"Sec-WebSocket-Protocol: mqtt\r\n\r\n"), cfg); hs.Protocol != "" {
		t.Fatalf("protocol %q for an offer the server does not speak", hs.Protocol)
	}
	if n := testing.AllocsPerRun(100, func() { ws.Accept(parseReq(t, goodRequest+"\r\n"), cfg) }); n > 0 {
		t.Logf("(the parse allocates %v)", n)
	}
	req := parseReq(t, goodRequest+"Sec-WebSocket-Protocol: chat\r\n\r\n")
	if n := testing.AllocsPerRun(100, func() { ws.Accept(req, cfg) }); n != 0 {
		t.Fatalf("Accept allocates %v times", n)
	}
}

// TestRefusals: each bad opening handshake is refused with the status RFC
// 6455 section 4.2.1 and 4.4 give, and the refusal says what the client
// needs (Sec-WebSocket-Version on 426, Allow on 405).
func TestRefusals(t *testing.T) {
	base := strings.Replace(goodRequest, "Origin: http://example.com\r\n", "", 1)
	tests := []struct {
		name, req string
		origins   []string
		status    int
		field     string
	}{
		{"POST", strings.Replace(base, "GET", "POST", 1) + "\r\n", nil, 405, "Allow: GET"},
		{"HTTP/1.0", strings.Replace(base, "HTTP/1.1", "HTTP/1.0", 1) + "\r\n", nil, 400, ""},
		{"no Upgrade", strings.Replace(base, "Upgrade: websocket\r\n", "", 1) + "\r\n", nil, 400, ""},
		{"Upgrade: h2c", strings.Replace(base, "Upgrade: websocket", "Upgrade: h2c", 1) + "\r\n", nil, 400, ""},
		{"no Connection: Upgrade", strings.Replace(base, "keep-alive, Upgrade", "keep-alive", 1) + "\r\n", nil, 400, ""},
		{"no key", strings.Replace(base, "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", "", 1) + "\r\n", nil, 400, ""},
		{"short key", strings.Replace(base, "dGhlIHNhbXBsZSBub25jZQ==", "dGhlIHNhbXBsZQ==", 1) + "\r\n", nil, 400, ""},
		{"key not base64", strings.Replace(base, "dGhlIHNhbXBsZSBub25jZQ==", "dGhlIHNhbXBsZSBub25jZ*==", 1) + "\r\n", nil, 400, ""},
		{"two keys", base + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", nil, 400, ""},
		{"no version", strings.Replace(base, "Sec-WebSocket-Version: 13\r\n", "", 1) + "\r\n", nil, 400, ""},
		{"version 8", strings.Replace(base, "Version: 13", "Version: 8", 1) + "\r\n", nil, 426, "Sec-WebSocket-Version: 13"},
		{"origin not allowed", base + "Origin: http://evil.example\r\n\r\n", []string{"http://example.com"}, 403, ""},
		{"no origin when origins are set", base + "\r\n", []string{"http://example.com"}, 403, ""},
		{"a body", base + "Content-Length: 3\r\n\r\n", nil, 400, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ws.Accept(parseReq(t, tc.req), &ws.Config{Origins: tc.origins})
			if err == nil || err.Status != tc.status {
				t.Fatalf("error %v, want status %d", err, tc.status)
			}
			out := ws.AppendRefusal(nil, err, []byte("Tue, 01 Dec 2026 12:00:00 GMT"))
			var resp http1.Response
			if ok, perr := http1.ParseResponse(out, &resp, false, http1.Limits{}); !ok || perr != nil {
				t.Fatalf("refusal %q does not parse: %v", out, perr)
			}
			if resp.Status != tc.status || !resp.Close || int(resp.ContentLength) != len(out)-resp.HeadLen {
				t.Fatalf("refusal %q", out)
			}
			if strings.Contains(string(out), "Unknown") {
				t.Fatalf("refusal %q has no reason phrase", out)
			}
			if tc.field != "" && !strings.Contains(string(out), tc.field+"\r\n") {
				t.Fatalf("refusal %q lacks %q", out, tc.field)
			}
		})
	}
	// An allowed origin passes.
	if _, err := ws.Accept(parseReq(t, goodRequest+"\r\n"), &ws.Config{Origins: []string{"http://EXAMPLE.com"}}); err != nil {
		t.Fatal(err)
	}
}

// TestNegotiateDeflate: the server's answer to permessage-deflate offers
// (RFC 7692 section 7.1), for its configurations.
func TestNegotiateDeflate(t *testing.T) {
	on := ws.Deflate{Enabled: true}
	takeover := ws.Deflate{Enabled: true, WriteContextTakeover: true, ReadContextTakeover: true}
	small := ws.Deflate{Enabled: true, ReadContextTakeover: true, ReadWindowBits: 10}
	tests := []struct {
		name   string
		cfg    ws.Deflate
		offers string
		want   string // the response's extension value, "" for declined
	}{
		{"off", ws.Deflate{}, "permessage-deflate", ""},
		{"plain", on, "permessage-deflate", "permessage-deflate; server_no_context_takeover; client_no_context_takeover"},
		{"browser", on, "permessage-deflate; client_max_window_bits", "permessage-deflate; server_no_context_takeover; client_no_context_takeover"},
		{"takeover", takeover, "permessage-deflate; client_max_window_bits", "permessage-deflate"},
		{"client asks no takeover of the server", takeover, "permessage-deflate; server_no_context_takeover", "permessage-deflate; server_no_context_takeover"},
		{"server window 9", on, "permessage-deflate; server_max_window_bits=9", "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=9"},
		{"quoted value", on, `permessage-deflate; server_max_window_bits="10"`, "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10"},
		{"client window told", takeover, "permessage-deflate; client_max_window_bits=12", "permessage-deflate; client_max_window_bits=12"},
		{"client window asked", small, "permessage-deflate; client_max_window_bits", "permessage-deflate; server_no_context_takeover; client_max_window_bits=10"},
		{"client window asked, smaller offered", small, "permessage-deflate; client_max_window_bits=9", "permessage-deflate; server_no_context_takeover; client_max_window_bits=9"},
		{"client window not offered: not asked", small, "permessage-deflate", "permessage-deflate; server_no_context_takeover"},
		{"unknown parameter declined", on, "permessage-deflate; foo", ""},
		{"repeated parameter declined", on, "permessage-deflate; server_no_context_takeover; server_no_context_takeover", ""},
		{"window 16 declined", on, "permessage-deflate; server_max_window_bits=16", ""},
		{"window 7 declined", on, "permessage-deflate; server_max_window_bits=7", ""},
		{"leading zero declined", on, "permessage-deflate; server_max_window_bits=09", ""},
		{"window without value declined", on, "permessage-deflate; server_max_window_bits", ""},
		{"value on a flag declined", on, "permessage-deflate; client_no_context_takeover=1", ""},
		{"first acceptable offer", on, "permessage-deflate; foo, x-webkit-deflate-frame, permessage-deflate; client_max_window_bits=10",
			"permessage-deflate; server_no_context_takeover; client_no_context_takeover; client_max_window_bits=10"},
		{"other extension only", on, "x-webkit-deflate-frame", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hs, err := ws.Accept(parseReq(t, goodRequest+"Sec-WebSocket-Extensions: "+tc.offers+"\r\n\r\n"), &ws.Config{Deflate: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if hs.Deflate.Enabled {
				got = string(hs.Deflate.AppendTo(nil))
			}
			if got != tc.want {
				t.Fatalf("answer %q, want %q", got, tc.want)
			}
		})
	}
}

// TestClientHandshake: a client's request is accepted by the server side,
// and the client side checks the answer.
func TestClientHandshake(t *testing.T) {
	for _, d := range []ws.Deflate{{}, {Enabled: true}, {Enabled: true, WriteContextTakeover: true, ReadContextTakeover: true, ReadWindowBits: 11}} {
		ccfg := &ws.Config{Protocols: []string{"v2.proto", "v1.proto"}, Deflate: d}
		scfg := &ws.Config{Protocols: []string{"v1.proto"}, Deflate: ws.Deflate{Enabled: true, WriteContextTakeover: true, ReadContextTakeover: true}}
		key := ws.NewKey()
		req := ws.AppendRequest(nil, "example.com:80", "/ws?x=1", &key, ccfg, "Origin: http://example.com\r\n")
		hs, herr := ws.Accept(parseReq(t, string(req)), scfg)
		if herr != nil {
			t.Fatalf("%+v: %v", d, herr)
		}
		resp := ws.AppendAccept(nil, &hs)
		var r http1.Response
		if ok, err := http1.ParseResponse(resp, &r, false, http1.Limits{}); !ok || err != nil {
			t.Fatal(err)
		}
		chs, err := ws.CheckResponse(&r, &key, ccfg)
		if err != nil {
			t.Fatalf("%+v: %v (response %q)", d, err, resp)
		}
		if chs.Protocol != "v1.proto" || chs.Deflate != hs.Deflate {
			t.Fatalf("%+v: client agreed %+v, server %+v", d, chs, hs)
		}
		if d.Enabled && d.ReadWindowBits == 11 && hs.Deflate.ServerMaxWindowBits != 11 {
			t.Fatalf("asked server window 11, agreed %+v", hs.Deflate)
		}
	}
	key := ws.NewKey()
	other := ws.NewKey()
	ok101 := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	accept := ws.AcceptKey(key[:])
	acc := "Sec-WebSocket-Accept: " + string(accept[:]) + "\r\n"
	wrong := ws.AcceptKey(other[:])
	deflateCfg := &ws.Config{Protocols: []string{"chat"}, Deflate: ws.Deflate{Enabled: true}}
	bad := []struct{ name, resp string }{
		{"200", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
		{"no upgrade", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n" + acc + "\r\n"},
		{"no connection", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n" + acc + "\r\n"},
		{"wrong accept", ok101 + "Sec-WebSocket-Accept: " + string(wrong[:]) + "\r\n\r\n"},
		{"no accept", ok101 + "\r\n"},
		{"protocol not offered", ok101 + acc + "Sec-WebSocket-Protocol: mqtt\r\n\r\n"},
		{"extension not offered", ok101 + acc + "Sec-WebSocket-Extensions: x-webkit-deflate-frame\r\n\r\n"},
		{"no server_no_context_takeover", ok101 + acc + "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"},
		{"twice", ok101 + acc + "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover, permessage-deflate; server_no_context_takeover\r\n\r\n"},
		{"bad window", ok101 + acc + "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; server_max_window_bits=20\r\n\r\n"},
		{"client window without value", ok101 + acc + "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_max_window_bits\r\n\r\n"},
	}
	for _, tc := range bad {
		var r http1.Response
		if ok, err := http1.ParseResponse([]byte(tc.resp), &r, false, http1.Limits{}); !ok || err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, err := ws.CheckResponse(&r, &key, deflateCfg)
		var ce *ws.ClientError
		if !errors.As(err, &ce) {
			t.Errorf("%s: error %v, want a *ClientError", tc.name, err)
		}
	}
}
