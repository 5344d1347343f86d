// Package tlsconn is TLS for an event loop: crypto/tls driven without a
// goroutine per connection and without a socket of its own (sans-I/O).
//
// crypto/tls does everything cryptographic: the handshake, the key
// schedule, the records, alerts, session tickets, KeyUpdate. This package
// puts a tls.Conn on a transport that never touches a socket and decides
// when the tls.Conn runs:
//
//   - The handshake runs on a Pool goroutine (bounded, counted, with a
//     timeout), so its milliseconds of CPU never run on a loop, and while
//     it computes its thread is at nice 19 (PoolConfig.Sched), so that a
//     loop on the same CPU gets the CPU as soon as the kernel wakes the
//     loop (where the process can put the thread back: EffectiveSched).
//     The loop feeds it the peer's bytes (Session.Decrypt) and
//     sends what it wrote (Session.Output) when Options.Notify says there
//     is something.
//   - After the handshake, the loop calls the tls.Conn itself, only when a
//     whole record is buffered (the 5-byte header says how long it is), so
//     a read never waits: Decrypt turns ciphertext into plaintext,
//     Encrypt plaintext into ciphertext, CloseNotify gives the
//     close_notify alert.
//
// A loop's use of a session, in outline:
//
//	s := tlsconn.Server(cfg, tlsconn.Options{Pool: pool, Notify: post})
//	// the peer's bytes arrived:
//	plain, err := s.Decrypt(scratch[:0], data, budget)
//	send(s.Output(nil))           // handshake flights, alerts, KeyUpdate answers
//	deliver(plain)                // to the handler, valid during the call
//	// on Notify (posted to the loop):
//	send(s.Output(nil))
//	if done, err := s.HandshakeDone(); done { ... s.Decrypt(scratch[:0], nil, budget) ... }
//	// the handler writes:
//	out, err = s.Encrypt(out, p)
//	// closing:
//	send(s.CloseNotify(nil)); s.Close()
//
// # What a loop owes a session
//
//   - Send Output after every Decrypt and on every Notify, before anything
//     Encrypt returns later (Encrypt and CloseNotify put it first
//     themselves).
//   - Count its turn budget and its outbound cap in plaintext: Decrypt's
//     max is the budget, Encrypt's input the bytes the handler wrote. While
//     Buffered is above the inbound cap (a peer pushing during the
//     handshake), pause reading.
//   - Learn the handshake's end from whichever comes first: HandshakeDone
//     on a Notify, or Decrypt returning the handshake's error.
//   - On Close, send CloseNotify's alert, then Close the session; on the
//     peer's end of stream without close_notify, Close it.
//
// See docs/decisions/0033-tls-engine.md for the design and its
// alternatives, and docs/performance.md for what it costs.
//
// # Caveats
//
//   - A Session belongs to one loop: only that goroutine calls its
//     methods. A Pool is safe for concurrent use and may serve every loop.
//   - Decrypt does not retain ct; what it cannot consume yet it copies, into
//     a pooled buffer held only until it is consumed. Plaintext is appended
//     to the caller's dst; Encrypt's ciphertext to the caller's dst.
//   - The tls.Config's callbacks (GetCertificate, GetConfigForClient,
//     VerifyPeerCertificate, ...) run on pool goroutines, during the
//     handshake; after it, crypto/tls calls none of them on the loop,
//     except the ClientSessionCache of a client receiving session tickets.
//   - Renegotiation is refused (crypto/tls's Config.Renegotiation default
//     for clients; servers never renegotiate): the peer's attempt is an
//     alert and an *Error.
package tlsconn
