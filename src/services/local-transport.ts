import {
  create,
  isMessage,
  type DescMessage,
  type DescMethod,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createContextValues,
  createServiceImplSpec,
  type ConnectRouter,
  type ContextValues,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
  type StreamRequest,
  type StreamResponse,
  type Transport,
  type UnaryResponse,
} from "@connectrpc/connect";
import { invokeUnaryImplementation, transformInvokeImplementation } from "@connectrpc/connect/protocol";

/** The abort reason of a finished call's context: one shared value, so ending a call builds no exception. */
const CALL_DONE = Object.freeze(new Error("the call is done"));

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
      for (const method of Object.values(spec.methods))
        specs.set(`${method.method.parent.typeName}/${method.method.name}`, method);
      return router;
    },
    rpc(method, impl) {
      specs.set(`${method.parent.typeName}/${method.name}`, {
        kind: method.methodKind,
        method,
        impl,
      } as MethodImplSpec);
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

async function* messagesOf<I extends DescMessage>(
  schema: I,
  input: AsyncIterable<MessageInitShape<I>>,
): AsyncIterable<MessageShape<I>> {
  for await (const item of input) yield messageOf(schema, item);
}

/** A handler context whose `abort` also drops its links to the caller's signal and deadline. */
type LocalContext = HandlerContext & { abort(reason: unknown): void };

/**
 * A handler context like Connect's `createHandlerContext`, made for the in-process path: one
 * AbortController (Connect's links a deadline controller and a linked controller, with a
 * listener on each signal, even without a deadline or a caller signal), and a deadline timer
 * only when the caller set a timeout. Profiles of the chat path showed the event-target work
 * of those controllers on every RPC (two per chat call).
 */
function localContext(
  method: DescMethod,
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  header: ConstructorParameters<typeof Headers>[0],
  contextValues: ContextValues | undefined,
): LocalContext {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let unlink: (() => void) | undefined;
  let deadline: () => number | undefined = () => undefined;
  if (timeoutMs !== undefined) {
    const at = Date.now() + timeoutMs;
    deadline = () => at - Date.now();
    const expire = () => controller.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
    if (timeoutMs <= 0) expire();
    else timer = setTimeout(expire, timeoutMs);
  }
  if (signal !== undefined && !controller.signal.aborted) {
    if (signal.aborted) controller.abort(signal.reason);
    else {
      const onAbort = () => controller.abort(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      unlink = () => signal.removeEventListener("abort", onAbort);
    }
  }
  return {
    service: method.parent,
    method,
    protocolName: "local",
    requestMethod: "POST",
    url: `/${method.parent.typeName}/${method.name}`,
    signal: controller.signal,
    timeoutMs: deadline,
    requestHeader: new Headers(header),
    responseHeader: new Headers(),
    responseTrailer: new Headers(),
    values: contextValues ?? createContextValues(),
    abort(reason) {
      clearTimeout(timer);
      unlink?.();
      controller.abort(reason);
    },
  };
}

/** Copies one header set into another, as Connect does between an interceptor's response and the context. */
function copyHeaders(from: Headers, to: Headers): void {
  if (from === to) return;
  for (const key of [...to.keys()]) to.delete(key);
  for (const [key, value] of from) to.set(key, value);
}

/** The single request message of a server-streaming call, refused like Connect's own check. */
async function singleMessage<T>(input: AsyncIterable<T>): Promise<T> {
  const it = input[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done === true)
    throw new ConnectError("protocol error: missing input message for server-streaming method", Code.Unimplemented);
  const second = await it.next();
  if (second.done !== true)
    throw new ConnectError(
      "protocol error: received extra input message for server-streaming method",
      Code.Unimplemented,
    );
  return first.value;
}

/** Full messages of a handler's output, which may yield init shapes (Connect's `normalizeIterable`). */
function normalized(schema: DescMessage, output: AsyncIterable<unknown>): AsyncIterable<unknown> {
  const transform = (r: IteratorResult<unknown>): IteratorResult<unknown> =>
    r.done === true ? r : { done: false, value: create(schema, r.value as MessageInitShape<DescMessage>) };
  return {
    [Symbol.asyncIterator]() {
      const it = output[Symbol.asyncIterator]();
      return {
        next: () => it.next().then(transform),
        ...(it.throw !== undefined && {
          throw: (e?: unknown) => (it.throw as (e?: unknown) => Promise<IteratorResult<unknown>>)(e).then(transform),
        }),
        ...(it.return !== undefined && {
          return: (v?: unknown) => (it.return as (v?: unknown) => Promise<IteratorResult<unknown>>)(v).then(transform),
        }),
      };
    },
  };
}

type Next = Parameters<Interceptor>[0];
type ServerStreamingSpec = Extract<MethodImplSpec, { kind: "server_streaming" }>;

/**
 * A server-streaming call through the interceptors, as Connect's `transformInvokeImplementation`
 * makes it, without its generic stream wrapper (a down-levelled async generator that passes
 * every message through several promise queues; it showed in profiles of SSE streams). The
 * same request reaches the interceptors and the same context the handler.
 */
function invokeServerStreaming(
  spec: ServerStreamingSpec,
  context: LocalContext,
  input: AsyncIterable<unknown>,
  interceptors: Interceptor[],
): Promise<StreamResponse<DescMessage, DescMessage>> {
  const method = spec.method;
  const handler: Next = async (req) => {
    const message = await singleMessage(req.message as AsyncIterable<MessageShape<DescMessage>>);
    const output = spec.impl(message, {
      ...context,
      service: req.service,
      requestHeader: req.header,
      signal: req.signal,
      values: req.contextValues,
    });
    return {
      stream: true,
      service: method.parent,
      method,
      header: context.responseHeader,
      trailer: context.responseTrailer,
      message: normalized(method.output, output),
    } as StreamResponse<DescMessage, DescMessage>;
  };
  let next = handler;
  for (let i = interceptors.length - 1; i >= 0; i--) next = (interceptors[i] as Interceptor)(next);
  return next({
    stream: true,
    service: method.parent,
    method,
    requestMethod: context.requestMethod,
    url: context.url,
    signal: context.signal,
    header: context.requestHeader,
    contextValues: context.values,
    message: input,
  } as StreamRequest<DescMessage, DescMessage>) as Promise<StreamResponse<DescMessage, DescMessage>>;
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
    const spec = specs.get(`${method.parent.typeName}/${method.name}`);
    if (!spec)
      throw new ConnectError(`${method.parent.typeName}/${method.name} is not served here`, Code.Unimplemented);
    return spec;
  };

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      const context = localContext(method, signal, timeoutMs, header, contextValues);
      try {
        const spec = specOf(method);
        if (spec.kind !== "unary") throw new ConnectError(`${method.name} is not unary`, Code.Unimplemented);
        const message = await invokeUnaryImplementation(spec, context, messageOf(method.input, input), interceptors);
        return {
          stream: false,
          service: method.parent,
          method,
          header: context.responseHeader,
          trailer: context.responseTrailer,
          message: message as MessageShape<typeof method.output>,
        } satisfies UnaryResponse<typeof method.input, typeof method.output>;
      } catch (err) {
        throw callerError(err, context.responseHeader, context.responseTrailer);
      } finally {
        context.abort(CALL_DONE);
      }
    },

    async stream(method, signal, timeoutMs, header, input, contextValues) {
      const context = localContext(method, signal, timeoutMs, header, contextValues);
      let it: AsyncIterator<unknown>;
      let trailer = context.responseTrailer;
      let first: IteratorResult<unknown>;
      try {
        const spec = specOf(method);
        if (spec.kind === "server_streaming") {
          const res = await invokeServerStreaming(spec, context, messagesOf(method.input, input), interceptors);
          copyHeaders(res.header, context.responseHeader);
          trailer = res.trailer;
          it = res.message[Symbol.asyncIterator]();
        } else {
          it = transformInvokeImplementation(
            spec,
            context,
            interceptors,
          )(messagesOf(method.input, input))[Symbol.asyncIterator]();
        }
        // The interceptors and the handler's checks run before the first message: their
        // refusals reject the call here, and their response headers are set by now.
        first = await it.next();
      } catch (err) {
        context.abort(CALL_DONE);
        throw callerError(err, context.responseHeader, context.responseTrailer);
      }
      let pending: IteratorResult<unknown> | undefined = first;
      let finished = false;
      /** Runs once, however the reader ends: the handler's own clean-up, then the context's end. */
      const finish = async () => {
        if (finished) return;
        finished = true;
        copyHeaders(trailer, context.responseTrailer);
        // A reader that stops early gets the handler's own clean-up (its iterator's return).
        await it.return?.();
        context.abort(CALL_DONE);
      };
      const DONE = { done: true, value: undefined } as const;
      // A hand-written iterator rather than an async generator: one promise per message
      // instead of a generator's queue, on every message of every stream.
      const messages: AsyncIterableIterator<MessageShape<typeof method.output>> = {
        [Symbol.asyncIterator]: () => messages,
        async next() {
          if (finished) return DONE;
          let step: IteratorResult<unknown>;
          if (pending !== undefined) {
            step = pending;
            pending = undefined;
          } else {
            try {
              step = await it.next();
            } catch (err) {
              const error = callerError(err, context.responseHeader, context.responseTrailer);
              await finish();
              throw error;
            }
          }
          if (step.done === true) {
            await finish();
            return DONE;
          }
          return { done: false, value: step.value as MessageShape<typeof method.output> };
        },
        async return() {
          await finish();
          return DONE;
        },
      };
      return {
        stream: true,
        service: method.parent,
        method,
        header: context.responseHeader,
        trailer: context.responseTrailer,
        message: messages,
      } satisfies StreamResponse<typeof method.input, typeof method.output>;
    },
  };
}
