// Microsoft's JavaScript Event Hubs SDK against the local endpoint, driven by the pytest suite.
//
// Usage: node client.mjs '<json>' where the JSON is {"connectionString", "steps": [...], "timeoutMs", "network"?}.
// Each step runs in order; the result of each is printed as one JSON document on stdout:
// {"results": [...]} on success, {"error": ..., "step": n, "results": [...]} on failure. A hard
// timeout ends the process (exit code 3) so a client that hangs fails a test quickly and clearly.
import {
  EventHubBufferedProducerClient,
  EventHubConsumerClient,
  EventHubProducerClient,
  earliestEventPosition,
  latestEventPosition,
} from "@azure/event-hubs";
import { BlobCheckpointStore } from "@azure/eventhubs-checkpointstore-blob";
import { ContainerClient } from "@azure/storage-blob";

const request = JSON.parse(process.argv[2]);
const results = [];

// {"network": {"webSocket": true, "customEndpointAddress": "sb://host:port", "caFile": "ca.pem"}}: every
// client of the run reaches the hub over WebSockets (the `ws` package: Node 20 has no WebSocket of its
// own) at that address, trusting that CA. The SDK's WebSockets are always wss://.
const NETWORK = {};
if (request.network?.webSocket) {
  NETWORK.webSocketOptions = { webSocket: (await import("ws")).WebSocket };
  if (request.network.caFile) {
    const { readFileSync } = await import("node:fs");
    NETWORK.webSocketOptions.webSocketConstructorOptions = { ca: readFileSync(request.network.caFile) };
  }
}
if (request.network?.customEndpointAddress) NETWORK.customEndpointAddress = request.network.customEndpointAddress;
let current = -1;

function finish(code, document) {
  process.stdout.write(JSON.stringify(document) + "\n", () => process.exit(code));
}

setTimeout(() => {
  finish(3, { error: `timed out after ${request.timeoutMs} ms`, step: current, results });
}, request.timeoutMs ?? 30000).unref();

// a body the JS producer sent is JSON the SDK parses back; one the Python SDK sent arrives as bytes
const text = (event) => (typeof event.body === "string" ? event.body
  : Buffer.isBuffer(event.body) || event.body instanceof Uint8Array ? Buffer.from(event.body).toString("utf8")
    : JSON.stringify(event.body));

function position(spec) {
  if (spec === "earliest") return earliestEventPosition;
  if (spec === "latest") return latestEventPosition;
  if ("enqueuedOn" in spec) return { enqueuedOn: new Date(spec.enqueuedOn) };
  return spec; // {sequenceNumber, isInclusive} or {offset, isInclusive}
}

function errorInfo(err) {
  return err ? { name: err.name, code: err.code, message: String(err.message).slice(0, 300) } : null;
}

// -- steps ------------------------------------------------------------------------------------

async function send(step) {
  // step.sends: [{bodies, partitionId?, partitionKey?}], one batch each
  const producer = new EventHubProducerClient(request.connectionString, { ...NETWORK, ...(step.clientOptions ?? {}) });
  const started = Date.now();
  try {
    const sent = [];
    for (const item of step.sends) {
      const options = {};
      if (item.partitionId !== undefined) options.partitionId = item.partitionId;
      if (item.partitionKey !== undefined) options.partitionKey = item.partitionKey;
      const batch = await producer.createBatch(options);
      for (const body of item.bodies) {
        if (!batch.tryAdd({ body })) throw new Error(`event ${body} does not fit a batch`);
      }
      await producer.sendBatch(batch);
      sent.push(batch.count);
    }
    if (step.single) {
      await producer.sendBatch(step.single.bodies.map((body) => ({ body })), step.single.options ?? {});
      sent.push(step.single.bodies.length);
    }
    return { sent, elapsedMs: Date.now() - started };
  } catch (err) {
    return { sent: null, error: errorInfo(err), elapsedMs: Date.now() - started };
  } finally {
    await producer.close();
  }
}

async function properties() {
  const producer = new EventHubProducerClient(request.connectionString, NETWORK);
  try {
    const hub = await producer.getEventHubProperties();
    const partitions = [];
    for (const id of hub.partitionIds) {
      const p = await producer.getPartitionProperties(id);
      partitions.push({
        partitionId: p.partitionId,
        beginningSequenceNumber: p.beginningSequenceNumber,
        lastEnqueuedSequenceNumber: p.lastEnqueuedSequenceNumber,
        lastEnqueuedOffset: String(p.lastEnqueuedOffset),
        isEmpty: p.isEmpty,
      });
    }
    return { name: hub.name, partitionIds: hub.partitionIds, createdOn: hub.createdOn.toISOString(), partitions };
  } finally {
    await producer.close();
  }
}

function subscribeUntil(client, partitionId, options, count, waitMs) {
  // events of one partition until `count` arrived or `waitMs` passed; errors collected, not thrown
  return new Promise((resolve) => {
    const events = [];
    const errors = [];
    let lastEnqueued = null; // the partition's last enqueued event, when the receiver tracks it
    let subscription;
    const done = () => {
      clearTimeout(timer);
      subscription.close().then(() => resolve({ events, errors, lastEnqueued }));
    };
    const timer = setTimeout(done, waitMs);
    subscription = client.subscribe(
      partitionId,
      {
        processEvents: async (batch, context) => {
          for (const e of batch) events.push({ body: text(e), sequenceNumber: e.sequenceNumber, offset: String(e.offset) });
          const last = context.lastEnqueuedEventProperties;
          if (batch.length && last && last.sequenceNumber !== undefined) {
            lastEnqueued = { sequenceNumber: last.sequenceNumber, offset: String(last.offset),
              enqueuedOn: last.enqueuedOn ? last.enqueuedOn.toISOString() : null,
              retrievedOn: last.retrievedOn ? last.retrievedOn.toISOString() : null };
          }
          if (events.length >= count) done();
        },
        processError: async (err) => {
          errors.push(errorInfo(err));
        },
      },
      { maxBatchSize: 100, maxWaitTimeInSeconds: 1, ...options },
    );
  });
}

async function receive(step) {
  // step.reads: [{partitionId, start, count, waitMs, trackLastEnqueued}] with start "earliest" | "latest" | {...}
  const client = new EventHubConsumerClient(step.consumerGroup ?? "$Default", request.connectionString, NETWORK);
  try {
    const reads = [];
    for (const read of step.reads) {
      const pending = subscribeUntil(client, read.partitionId,
        { startPosition: position(read.start), trackLastEnqueuedEventProperties: Boolean(read.trackLastEnqueued) },
        read.count, read.waitMs ?? 5000);
      if (read.sendWhileSubscribed) {
        // events published after the subscription opened (what a "latest" start must deliver)
        await new Promise((r) => setTimeout(r, read.sendWhileSubscribed.afterMs));
        await send({ sends: [{ bodies: read.sendWhileSubscribed.bodies, partitionId: read.partitionId }] });
      }
      const got = await pending;
      reads.push({ bodies: got.events.map((e) => e.body), sequenceNumbers: got.events.map((e) => e.sequenceNumber),
        errors: got.errors, lastEnqueued: got.lastEnqueued });
    }
    return { reads };
  } finally {
    await client.close();
  }
}

async function ownerLevels(step) {
  // a receiver with owner level 1 is taken over by one with owner level 2 on the same partition
  const first = new EventHubConsumerClient(step.consumerGroup, request.connectionString);
  const second = new EventHubConsumerClient(step.consumerGroup, request.connectionString);
  try {
    const firstErrors = [];
    const firstEvents = [];
    const sub1 = first.subscribe(step.partitionId, {
      processEvents: async (batch) => { for (const e of batch) firstEvents.push(text(e)); },
      processError: async (err) => { firstErrors.push(errorInfo(err)); },
    }, { ownerLevel: 1, startPosition: earliestEventPosition, maxWaitTimeInSeconds: 1 });
    const deadline = Date.now() + 10000;
    while (firstEvents.length < step.count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const got = await subscribeUntil(second, step.partitionId,
      { ownerLevel: 2, startPosition: earliestEventPosition }, step.count, 5000);
    const stolenBy = Date.now() + 5000;
    while (firstErrors.length === 0 && Date.now() < stolenBy) await new Promise((r) => setTimeout(r, 50));
    await sub1.close();
    return { firstEvents: firstEvents.length, firstErrors, secondEvents: got.events.length, secondErrors: got.errors };
  } finally {
    await first.close();
    await second.close();
  }
}

async function processWithCheckpoints(step) {
  // load-balanced processing with the blob checkpoint store until every partition checkpointed
  // its target sequence number (step.targets: {partitionId: sequenceNumber})
  const container = new ContainerClient(step.storageConnectionString, step.container);
  const store = new BlobCheckpointStore(container);
  const client = new EventHubConsumerClient(step.consumerGroup, request.connectionString, store,
    { loadBalancingOptions: { updateIntervalInMs: 500 } });
  const checkpointed = {}; // where each partition stands, starting from an earlier run's checkpoints
  for (const c of await store.listCheckpoints(client.fullyQualifiedNamespace, client.eventHubName, step.consumerGroup)) {
    checkpointed[c.partitionId] = c.sequenceNumber;
  }
  const errors = [];
  const reached = () => Object.entries(step.targets).every(([p, t]) => (checkpointed[p] ?? -1) >= t);
  try {
    if (!reached()) await new Promise((resolve) => {
      const subscription = client.subscribe({
        processEvents: async (batch, context) => {
          if (batch.length === 0) return;
          const target = step.targets[context.partitionId];
          // stop at the target: a checkpoint past it would hide a sensor that waits on less
          const upTo = batch.filter((e) => target === undefined || e.sequenceNumber <= target);
          if (upTo.length === 0) return;
          await context.updateCheckpoint(upTo[upTo.length - 1]);
          checkpointed[context.partitionId] = upTo[upTo.length - 1].sequenceNumber;
          if (reached()) subscription.close().then(resolve);
        },
        processError: async (err) => { errors.push(errorInfo(err)); },
      }, { startPosition: earliestEventPosition, maxBatchSize: 50, maxWaitTimeInSeconds: 1 });
    });
    const listed = await store.listCheckpoints(client.fullyQualifiedNamespace, client.eventHubName, step.consumerGroup);
    return { checkpointed, errors, listed: listed.map((c) => ({ partitionId: c.partitionId, sequenceNumber: c.sequenceNumber })) };
  } finally {
    await client.close();
  }
}

async function resumeFromCheckpoints(step) {
  // a processor with the blob checkpoint store that only reads: where it starts on each partition is
  // where the store's checkpoints put it (startPosition earliest where there is none); events until
  // step.count arrived, then step.settleMs more to catch any beyond, or step.waitMs in all
  const container = new ContainerClient(step.storageConnectionString, step.container);
  const client = new EventHubConsumerClient(step.consumerGroup, request.connectionString, new BlobCheckpointStore(container),
    { loadBalancingOptions: { strategy: "greedy", updateIntervalInMs: 500 } });
  const events = [];
  const errors = [];
  try {
    await new Promise((resolve) => {
      let settling = false;
      const subscription = client.subscribe({
        processEvents: async (batch, context) => {
          for (const e of batch) events.push({ body: text(e), partitionId: context.partitionId, sequenceNumber: e.sequenceNumber });
          if (events.length >= step.count && !settling) {
            settling = true;
            setTimeout(() => subscription.close().then(resolve), step.settleMs ?? 1500);
          }
        },
        processError: async (err) => { errors.push(errorInfo(err)); },
      }, { startPosition: earliestEventPosition, maxBatchSize: 100, maxWaitTimeInSeconds: 1 });
      setTimeout(() => subscription.close().then(resolve), step.waitMs ?? 15000);
    });
    return { events, errors };
  } finally {
    await client.close();
  }
}

function idempotentProducer(step, errors) {
  // the buffered producer with idempotent retries; partitionOptions (ownerLevel, producerGroupId,
  // startingSequenceNumber) go where the SDK's producer reads them per partition
  const buffered = new EventHubBufferedProducerClient(request.connectionString, {
    enableIdempotentRetries: true,
    maxWaitTimeInMs: 100,
    onSendEventsErrorHandler: (ctx) => { errors.push(errorInfo(ctx.error)); },
    ...(step.clientOptions ?? {}),
  });
  if (step.partitionOptions) buffered._producer._partitionOptions = { [step.partitionId]: step.partitionOptions };
  return buffered;
}

async function idempotentSend(step) {
  // step.rounds: [[bodies], ...], each enqueued then flushed; returns the partition's publishing
  // properties as the service answered the idempotent attach
  const errors = [];
  const buffered = idempotentProducer(step, errors);
  try {
    for (const bodies of step.rounds) {
      for (const body of bodies) await buffered.enqueueEvent({ body }, { partitionId: step.partitionId });
      await buffered.flush();
    }
    const publishing = await buffered._producer.getPartitionPublishingProperties(step.partitionId);
    return { errors, publishing };
  } finally {
    await buffered.close({ flush: false });
  }
}

async function idempotentFence(step) {
  // a second producer of the same group with a higher owner level fences the first
  const firstErrors = [];
  const secondErrors = [];
  const first = idempotentProducer(step, firstErrors);
  try {
    await first.enqueueEvent({ body: "first-1" }, { partitionId: step.partitionId });
    await first.flush();
    const before = await first._producer.getPartitionPublishingProperties(step.partitionId);
    const second = idempotentProducer({ partitionId: step.partitionId, partitionOptions: {
      producerGroupId: before.producerGroupId, ownerLevel: before.ownerLevel + 1,
      startingSequenceNumber: before.lastPublishedSequenceNumber } }, secondErrors);
    try {
      await second.enqueueEvent({ body: "second-1" }, { partitionId: step.partitionId });
      await second.flush();
      await first.enqueueEvent({ body: "first-2" }, { partitionId: step.partitionId });
      await first.flush();
      const after = await second._producer.getPartitionPublishingProperties(step.partitionId);
      return { before, after, firstErrors, secondErrors };
    } finally {
      await second.close({ flush: false });
    }
  } finally {
    await first.close({ flush: false });
  }
}

async function admin(method, path, body) {
  // the endpoint's admin API, as EmulatorAdmin calls it (faults are set between steps of one run)
  const response = await fetch(request.adminUrl + path, {
    method, headers: { "content-type": "application/json" }, body: body ? JSON.stringify(body) : undefined,
  });
  if (!response.ok) throw new Error(`admin ${method} ${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

async function fault(step) {
  return admin("POST", "/faults", { kind: step.kind, hub: step.hub, params: step.params ?? {} });
}

async function clearFaults() {
  return admin("DELETE", "/faults");
}

const STEPS = { fault, clearFaults, send, properties, receive, ownerLevels, processWithCheckpoints, resumeFromCheckpoints, idempotentSend, idempotentFence };

try {
  for (const [index, step] of request.steps.entries()) {
    current = index;
    const run = STEPS[step.op];
    if (!run) throw new Error(`unknown step ${step.op}`);
    results.push(await run(step));
  }
  finish(0, { results });
} catch (err) {
  finish(1, { error: errorInfo(err), step: current, results });
}
