package runtime

import (
	"context"
	"slices"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/osmhq/osm/sdk/internal/wasmstop"
)

// yieldListeners makes ctx, the context modules are compiled under, listen on the yield function package
// wasmstop adds to every module, and on nothing else: every other function runs without leaving the machine
// code. The guest calls it every wasmstop.Interval loop iterations; its listener stops the guest once the
// context the guest runs under (a call's, or an instantiation's: the start function) has ended.
func yieldListeners(ctx context.Context) context.Context {
	return experimental.WithFunctionListenerFactory(ctx, experimental.FunctionListenerFactoryFunc(func(def api.FunctionDefinition) experimental.FunctionListener {
		if slices.Contains(def.ExportNames(), wasmstop.YieldExport) {
			return yieldListener{}
		}
		return nil
	}))
}

type yieldListener struct{}

// Before sets the instance's stop flag when ctx has ended: the yield function then traps, which ends the call
// with the trap; the caller reports the timeout or the cancellation from its context.
func (yieldListener) Before(ctx context.Context, mod api.Module, _ api.FunctionDefinition, _ []uint64, _ experimental.StackIterator) {
	if ctx.Err() == nil {
		return
	}
	if flag, ok := mod.ExportedGlobal(wasmstop.FlagExport).(api.MutableGlobal); ok {
		flag.Set(1)
	}
}

func (yieldListener) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {}

func (yieldListener) Abort(context.Context, api.Module, api.FunctionDefinition, error) {}
