import { create, isMessage, type DescMessage, type DescMethod, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import {
  Code, ConnectError, createHandlerContext, createServiceImplSpec,
  type ConnectRouter, type ContextValues, type Interceptor, type MethodImplSpec, type StreamResponse, type Transport, type UnaryResponse,
} from "@connectrpc/connect";
import { invokeUnaryImplementation, transformInvokeImplementation } from "@connectrpc/connect/protocol";

/** The abort reason of a finished call's context: one shared value, so ending a call builds no exception. */
const CALL_DONE = Object.freeze(new Error("the call is done"));

/** A signal that never aborts, for calls made without one. */
const NEVER = new AbortController().signal;

/**
 * Collects the method implementations that `routes` registers, without building any protocol
 * handler (no serializer, no web stream).
 */
function collect(routes: (router: ConnectRouter) => void): Map<string, MethodImplSpec> {
  const specs = new Map<string, MethodImplSpec>();
  const router: ConnectRouter = {
    handlers: [],
    service(service, implementation) {
      const spec = createServiceImplSpec(service, implementation);
      for (const method of Object.values(spec.methods)) specs.set(method.method.parent.typeName + "/" + method.method.name, method);
      return router;
    },
    rpc(method, impl) {
      specs.set(method.parent.typeName + "/" + method.name, { kind: method.methodKind, method, impl } as MethodImplSpec);
      return router;
    },
  };
  routes(router);
  return specs;
}

/**
 * The error a caller sees: like a gRPC client, which reads the response headers and trailers
 * of a failed call into the error's metadata (rate-limit state, request id), the local caller
 * gets them too.
 */
function callerError(err: unknown, header: Headers, trailer: Headers): ConnectError {
  const error = ConnectError.from(err);
  for (const source of [header, trailer]) {
    source.forEach((value, name) => {
      if (!error.metadata.has(name)) error.metadata.set(name, value);
    });
  }
  return error;
}

/** The message of an init shape: the same object when it already is one (no copy, no encoding). */
function messageOf<I extends DescMessage>(schema: I, input: MessageInitShape<I>): MessageShape<I> {
  return isMessage(input, schema) ? input : create(schema, input);
}

async function* messagesOf<I extends DescMessage>(schema: I, input: AsyncIterable<MessageInitShape<I>>): AsyncIterable<MessageShape<I>> {
  for await (const item of input) yield messageOf(schema, item);
}

/**
 * A Connect `Transport` that calls the core's handlers in the same process, through the same
 * interceptor chain a gRPC caller meets (auth, request id, logging, rate limit), with messages
 * crossing as objects: no protobuf encoding or decoding, no web streams, no envelopes. The
 * edge uses it when it shares a process with the core, and a gRPC transport otherwise, with
 * the same edge code (DESIGN, "Edge").
 */
export function createLocalTransport(routes: (router: ConnectRouter) => void, interceptors: Interceptor[]): Transport {
  const specs = collect(routes);
  const specOf = (method: DescMethod): MethodImplSpec => {
    const spec = specs.get(method.parent.typeName + "/" + method.name);
    if (!spec) throw new ConnectError(`${method.parent.typeName}/${method.name} is not served here`, Code.Unimplemented);
    return spec;
  };
  const contextOf = (method: DescMethod, signal: AbortSignal | undefined, timeoutMs: number | undefined, header: ConstructorParameters<typeof Headers>[0], contextValues: ContextValues | undefined) =>
    createHandlerContext({
      service: method.parent, method, protocolName: "local", requestMethod: "POST",
      url: `/${method.parent.typeName}/${method.name}`,
      requestSignal: signal ?? NEVER, timeoutMs, requestHeader: header, contextValues,
    });

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const context = contextOf(method, signal, timeoutMs, header, contextValues);
      try {
        const spec = specOf(method);
        if (spec.kind !== "unary") throw new ConnectError(`${method.name} is not unary`, Code.Unimplemented);
        const message = await invokeUnaryImplementation(spec, context, messageOf(method.input, input), interceptors);
        return {
          stream: false, service: method.parent, method, header: context.responseHeader, trailer: context.responseTrailer,
          message: message as MessageShape<typeof method.output>,
        } satisfies UnaryResponse<typeof method.input, typeof method.output>;
      } catch (err) {
        throw callerError(err, context.responseHeader, context.responseTrailer);
      } finally {
        context.abort(CALL_DONE);
      }
    },

    async stream(method, signal, timeoutMs, header, input, contextValues) {
      const context = contextOf(method, signal, timeoutMs, header, contextValues);
      const output = transformInvokeImplementation(specOf(method), context, interceptors)(messagesOf(method.input, input));
      const it = output[Symbol.asyncIterator]();
      let first: IteratorResult<unknown>;
      try {
        // The interceptors and the handler's checks run before the first message: their
        // refusals reject the call here, and their response headers are set by now.
        first = await it.next();
      } catch (err) {
        context.abort(CALL_DONE);
        throw callerError(err, context.responseHeader, context.responseTrailer);
      }
      const messages = async function* (): AsyncGenerator<MessageShape<typeof method.output>> {
        try {
          if (first.done) return;
          yield first.value as MessageShape<typeof method.output>;
          for (;;) {
            const next = await it.next();
            if (next.done) return;
            yield next.value as MessageShape<typeof method.output>;
          }
        } catch (err) {
          throw callerError(err, context.responseHeader, context.responseTrailer);
        } finally {
          // A reader that stops early gets the handler's own clean-up (its iterator's return).
          await it.return?.();
          context.abort(CALL_DONE);
        }
      };
      return {
        stream: true, service: method.parent, method, header: context.responseHeader, trailer: context.responseTrailer,
        message: messages(),
      } satisfies StreamResponse<typeof method.input, typeof method.output>;
    },
  };
}
