// Package gwproto is the WebSocket gateway protocol of issue 27, written down
// once: what examples/ws_gateway (percore) and the peer gateways of the
// benchmark (baseline/wsnbio, baseline/wsgws, baseline/wsgorilla) implement,
// and what the load tool (wsload) drives and checks. It also holds the
// pieces the peers and the tool share: the token, the command parser, a
// topic registry, a small WebSocket client (Client) and, in gwtest, the
// test every gateway passes.
//
// # Connecting
//
//	GET /ws?user=U&token=T HTTP/1.1   (an RFC 6455 opening handshake)
//
// T is the lowercase hex HMAC-SHA256 of U under the server's secret
// (-secret S): Token(S, U). A request without user, without token, with a
// token that is not that one (compared in constant time), or to any other
// path is answered 401 Unauthorized before any upgrade; a good token with a
// request that is not a valid WebSocket handshake is the library's own 4xx.
// Nothing else is checked (no origin, no subprotocol, no compression:
// permessage-deflate is off in every gateway, as it is off by default in
// percore's codec, decision 0032).
//
// # Commands (text frames from the client)
//
//	SUB topic     subscribe this connection to topic
//	UNSUB topic   leave topic
//
// topic is one or more bytes without spaces (at most 128). The server
// answers each command, once it has taken effect, with one text frame:
// "OK SUB topic" or "OK UNSUB topic" (subscribing twice, or leaving a
// topic one is not in, is not an error and is answered the same). Any
// other text frame is answered "ERR " and a reason, and the connection
// stays open. The acknowledgement is what lets a client (and the load
// tool's storm) know that a publish that follows will reach it; without
// it "subscribed" could only be guessed with a sleep.
//
// # Publishing
//
//	POST /publish?topic=T   (the body: the message)
//
// delivers the body, as one unfragmented text frame, to every connection
// subscribed to T when the request is handled, and answers 200 OK with
// the number of connections it was handed to (in decimal, text/plain, no
// newline): a subscriber whose outbound queue is full is not counted
// (below). 200 with a count rather than 204: the count is what lets the
// load tool check a fan-out against the number of subscribers it holds.
// A topic without subscribers answers 200 and "0". The body must be UTF-8
// (it goes out as text); a publish without topic is 400, any method but
// POST 405. A subscriber receives each message once; two publishes to one
// topic, the second sent after the first was answered, reach every
// subscriber in that order (publishes in flight at the same time may reach
// different subscribers in different orders). A publish may reach a
// subscriber before that subscriber has read the acknowledgement of its
// SUB.
//
// # Binary frames: echo
//
// Without an upstream (the peers have none; examples/ws_gateway has
// -upstream) a binary message from a client is sent back to it, unchanged,
// as one binary frame, in order.
//
// # Heartbeats
//
// The server sends a Ping to a connection at least every -ping-interval
// (default 30s; a gateway may skip connections it heard from within the
// interval), and closes a connection it has heard nothing from, not even
// a Pong, for twice that. A Ping from a client is answered with a Pong of
// the same payload. Close frames follow RFC 6455.
//
// # Slow consumers
//
// Each connection has an outbound cap (-queue, default 256 messages): a
// published message that would go over it is dropped for that subscriber
// (counted, and not counted in the publish's answer); a connection whose
// writes make no progress for -write-timeout (default 10s) is closed. How
// each library can do this: decision 0046 (nbio's own cap closes the
// connection without dropping first).
//
// # Flags every gateway takes
//
//	-addr host:port        where to listen (127.0.0.1:0 picks a port)
//	-secret S              the token secret (default "percore")
//	-ping-interval D       as above (default 30s)
//	-queue N               the outbound cap, in messages (default 256)
//	-write-timeout D       as above (default 10s)
//
// A gateway prints "listening on ADDR" (the bound address) on stderr once
// it accepts connections, as the other benchmark servers do, and exits
// cleanly on SIGINT or SIGTERM.
package gwproto
