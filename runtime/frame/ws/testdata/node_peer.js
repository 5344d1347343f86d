// The npm ws package as the peer of the interop tests (node_test.go).
//
//   node node_peer.js server DEFLATE        echo server; prints its port
//   node node_peer.js client URL DEFLATE    sends the test messages to an
//                                            echo server, checks the echoes,
//                                            a ping, and the close; exit 0
//
// DEFLATE is a JSON perMessageDeflate option (false, true, or an object).
'use strict';
const WebSocket = require('ws');

const mode = process.argv[2];

function messages() {
  let big = '';
  for (let i = 0; big.length < (1 << 20); i++) big += `{"n":${i},"city":"Zürich"}\n`;
  const bin = Buffer.alloc(70000);
  for (let i = 0; i < bin.length; i++) bin[i] = (i * 31) & 0xff;
  return [
    { data: '', binary: false },
    { data: 'hello', binary: false },
    { data: 'Größe 𝄞 € '.repeat(20), binary: false },
    { data: bin, binary: true },
    { data: big, binary: false },
  ];
}

function fail(msg) {
  console.error('node peer: ' + msg);
  process.exit(1);
}

setTimeout(() => fail('timeout'), 30000).unref();

if (mode === 'server') {
  const deflate = JSON.parse(process.argv[3]);
  const wss = new WebSocket.Server({ host: '127.0.0.1', port: 0, perMessageDeflate: deflate, maxPayload: 16 << 20 }, () => {
    console.log(wss.address().port);
  });
  wss.on('connection', (sock, req) => {
    sock.on('message', (data, isBinary) => sock.send(data, { binary: isBinary }));
  });
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
} else if (mode === 'client') {
  const url = process.argv[3];
  const deflate = JSON.parse(process.argv[4]);
  const sock = new WebSocket(url, { perMessageDeflate: deflate, maxPayload: 16 << 20 });
  const msgs = messages().concat(messages());
  let i = 0;
  sock.on('open', () => {
    const want = deflate !== false;
    const agreed = /permessage-deflate/.test(sock.extensions);
    if (agreed !== want) fail(`permessage-deflate agreed ${agreed}, want ${want} (${sock.extensions})`);
    sock.send(msgs[0].data, { binary: msgs[0].binary });
  });
  sock.on('message', (data, isBinary) => {
    const m = msgs[i];
    const want = Buffer.from(m.data);
    if (isBinary !== m.binary || !Buffer.from(data).equals(want)) fail(`message ${i}: echo of ${data.length} bytes, want ${want.length}`);
    i++;
    if (i < msgs.length) {
      sock.send(msgs[i].data, { binary: msgs[i].binary });
    } else {
      sock.ping('node ping');
    }
  });
  sock.on('pong', (data) => {
    if (data.toString() !== 'node ping') fail(`pong ${data}`);
    sock.close(4003, 'bye');
  });
  sock.on('close', (code) => {
    if (i !== msgs.length) fail(`closed after ${i} messages with ${code}`);
    if (code !== 4003 && code !== 1000) fail(`close echoed ${code}`);
    process.exit(0);
  });
  sock.on('error', (err) => fail(String(err)));
}
