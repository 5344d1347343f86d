module github.com/percore/percore/examples/bench

go 1.26.0

require (
	github.com/cloudwego/netpoll v0.7.2
	github.com/gorilla/websocket v1.5.3
	github.com/lesismal/nbio v1.6.8
	github.com/lxzan/gws v1.8.9
	github.com/panjf2000/gnet/v2 v2.9.7
	github.com/percore/percore v0.0.0-00010101000000-000000000000
	github.com/valyala/fasthttp v1.78.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/BurntSushi/toml v1.4.1-0.20240526193622-a339e1f7089c // indirect
	github.com/bytedance/gopkg v0.1.1 // indirect
	github.com/cloudwego/gopkg v0.1.4 // indirect
	github.com/dolthub/maphash v0.1.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/lesismal/llib v1.2.2 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/panjf2000/ants/v2 v2.11.3 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.27.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/exp/typeparams v0.0.0-20231108232855-2478ac86f678 // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/tools v0.51.0 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
	honnef.co/go/tools v0.8.2 // indirect
)

replace github.com/percore/percore => ../..

tool honnef.co/go/tools/cmd/staticcheck
