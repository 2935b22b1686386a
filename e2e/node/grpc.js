'use strict';
// Produces and consumes through rocketkv's gRPC proxy (bin/proxy) with
// RocketMQ 5's Node.js client, rocketmq-client-nodejs, unchanged. Driven by
// e2e/grpc_test.go, which starts a name server, a broker and the proxy and
// checks the broker's side afterwards.
//
// Environment: ENDPOINT (the proxy's host:port), TOPIC, FIFO_TOPIC (a
// topic of message.type FIFO), TXN_TOPIC (TRANSACTION), DELAY_TOPIC
// (DELAY), COMPACT_TOPIC (cleanup.policy COMPACTION), GROUP, COUNT,
// TIMEOUT_MS. Prints one line "RESULT {...}" and exits 0 when every check
// below held, 1 otherwise.
const { Producer, SimpleConsumer, PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const endpoints = process.env.ENDPOINT;
const topic = process.env.TOPIC;
const fifoTopic = process.env.FIFO_TOPIC;
const txnTopic = process.env.TXN_TOPIC;
const delayTopic = process.env.DELAY_TOPIC;
const compactTopic = process.env.COMPACT_TOPIC;
const group = process.env.GROUP;
const count = Number(process.env.COUNT || 20);
const deadline = Date.now() + Number(process.env.TIMEOUT_MS || 90000);
const quiet = { info() {}, warn() {}, debug() {}, error: console.error, close() {} };
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };

// startup starts a client, failing after 20 s instead of waiting for ever:
// the client's startup waits for the proxy's first settings answer and
// misses one that arrives before it began waiting (it asks while fetching
// routes), so it would hang until the test's kill and print nothing.
async function startup(client, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: startup got no settings answer in 20 s`)), 20000);
  });
  try {
    await Promise.race([ client.startup(), timeout ]);
  } finally {
    clearTimeout(timer);
  }
}

async function produce(result) {
  // One topic up front: with two, the settings answer can come while the
  // client still fetches the second route, before its startup waits for
  // it (rocketmq-client-nodejs 1.0.8); the FIFO topic's route is fetched
  // at its first send.
  const producer = new Producer({ endpoints, namespace: '', topics: [ topic ], logger: quiet });
  await startup(producer, 'producer');
  for (let i = 0; i < count; i++) {
    const receipt = await producer.send({
      topic, tag: 'TagGrpc', keys: [ `key-${i}` ],
      properties: new Map([[ 'seq', String(i) ]]),
      body: Buffer.from(`grpc-${i}`),
    });
    check(typeof receipt.messageId === 'string' && receipt.messageId.length > 0, `send ${i}: no message id`);
    result.ids[i] = receipt.messageId;
    result.sent++;
  }
  for (let i = 0; i < count / 2; i++) {
    await producer.send({ topic, tag: 'TagOther', body: Buffer.from(`other-${i}`) });
    result.sentOther++;
  }
  // A message group's messages land in one queue, in order (the test
  // checks the queues); a FIFO topic refuses a message without a group on
  // the client's side, as with RocketMQ.
  for (let i = 0; i < 6; i++) {
    await producer.send({ topic: fifoTopic, messageGroup: 'order-1', body: Buffer.from(`fifo-${i}`) });
    result.sentFifo++;
  }
  try {
    await producer.send({ topic: fifoTopic, body: Buffer.from('no group') });
    failures.push('a NORMAL message was accepted for the FIFO topic');
  } catch (e) {
    check(/message type/.test(String(e.message)), `FIFO topic refused a NORMAL message with ${e.message}`);
  }
  // A property the system owns is refused with a clear error.
  try {
    await producer.send({ topic, body: Buffer.from('x'), properties: new Map([[ 'UNIQ_KEY', 'mine' ]]) });
    failures.push('a message with the system property UNIQ_KEY was accepted');
  } catch (e) {
    result.refused = String(e.message || e);
  }
  await producer.shutdown();
}

// A simple consumer receives every TagGrpc message, none of the others;
// every fifth is put back for a second (changeInvisibleDuration) and must
// come again with its delivery attempt at 2.
async function consumeSimple(result) {
  const consumer = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup: group, logger: quiet,
    subscriptions: new Map([[ topic, 'TagGrpc' ]]), awaitDuration: 5000,
  });
  await startup(consumer, 'simple consumer');
  const acked = new Set();
  const putBack = new Set();
  while (acked.size < count && Date.now() < deadline) {
    const messages = await consumer.receive(16, 15000);
    for (const m of messages) {
      const seq = Number(m.properties.get('seq'));
      check(m.tag === 'TagGrpc', `received tag ${m.tag}`);
      check(m.keys.includes(`key-${seq}`), `message ${seq} has keys ${m.keys}`);
      check(m.body.toString() === `grpc-${seq}`, `message ${seq} has body ${m.body}`);
      check(m.messageId === result.ids[seq], `message ${seq} has id ${m.messageId}, sent as ${result.ids[seq]}`);
      check(!m.corrupted, `message ${seq}: body digest does not match`);
      if (seq % 5 === 0 && !putBack.has(seq)) {
        putBack.add(seq);
        await consumer.changeInvisibleDuration(m, 1000);
        result.putBack++;
        continue;
      }
      if (putBack.has(seq)) {
        check(m.deliveryAttempt === 2, `message ${seq} came back with delivery attempt ${m.deliveryAttempt}`);
        result.cameBack++;
      }
      if (acked.has(seq)) {
        result.redelivered++;
      }
      await consumer.ack(m);
      acked.add(seq);
    }
  }
  result.simpleAcked = acked.size;
  // Everything was acknowledged: nothing comes again.
  const rest = await consumer.receive(16, 15000);
  result.leftover = rest.length;
  await consumer.shutdown();
}

// A push consumer of another group gets every message of the topic; the
// first delivery of every seventh TagGrpc message fails and is retried.
async function consumePush(result) {
  const seen = new Map();
  const succeeded = new Set();
  let resolveAll;
  const all = new Promise(resolve => { resolveAll = resolve; });
  const want = result.sent + result.sentOther;
  const consumer = new PushConsumer({
    endpoints, namespace: '', consumerGroup: `${group}-push`, logger: quiet,
    subscriptions: new Map([[ topic, '*' ]]),
    messageListener: {
      async consume(m) {
        const body = m.body.toString();
        const n = (seen.get(body) || 0) + 1;
        seen.set(body, n);
        const seq = m.properties.get('seq');
        if (seq !== undefined && Number(seq) % 7 === 0 && n === 1) {
          return ConsumeResult.FAILURE;
        }
        if (n === 2) {
          result.pushRetried++;
        }
        succeeded.add(body);
        if (succeeded.size >= want) {
          resolveAll();
        }
        return ConsumeResult.SUCCESS;
      },
    },
  });
  await startup(consumer, 'push consumer');
  await Promise.race([ all, new Promise(resolve => setTimeout(resolve, Math.max(deadline - Date.now(), 0))) ]);
  result.pushConsumed = succeeded.size;
  await consumer.shutdown();
}

// Transactions: one committed, one rolled back, one left open that the
// broker's check asks the producer about (its checker commits it). A
// consumer then gets exactly the committed two.
async function transactions(result) {
  const checked = [];
  const producer = new Producer({
    endpoints, namespace: '', topics: [ txnTopic ], logger: quiet,
    checker: {
      async check(m) {
        checked.push(m.body.toString());
        return m.body.toString() === 'txn-orphan' ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
      },
    },
  });
  await startup(producer, 'transaction producer');
  const commit = producer.beginTransaction();
  await producer.send({ topic: txnTopic, body: Buffer.from('txn-commit') }, commit);
  await commit.commit();
  const rollback = producer.beginTransaction();
  await producer.send({ topic: txnTopic, body: Buffer.from('txn-rollback') }, rollback);
  await rollback.rollback();
  const orphan = producer.beginTransaction();
  await producer.send({ topic: txnTopic, body: Buffer.from('txn-orphan') }, orphan);

  const consumer = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup: `${group}-txn`, logger: quiet,
    subscriptions: new Map([[ txnTopic, '*' ]]), awaitDuration: 5000,
  });
  await startup(consumer, 'transaction consumer');
  const got = new Set();
  while (got.size < 2 && Date.now() < deadline) {
    for (const m of await consumer.receive(16, 15000)) {
      got.add(m.body.toString());
      await consumer.ack(m);
    }
  }
  // The rolled-back message must not come, even late.
  for (const m of await consumer.receive(16, 15000)) {
    got.add(m.body.toString());
  }
  result.txnDelivered = [ ...got ].sort();
  result.txnChecked = checked;
  await consumer.shutdown();
  await producer.shutdown();
}

// A delay message can be recalled before it is due: the broker never
// delivers it; another one is delivered at its time, not more than the
// timer's precision before.
async function delays(result) {
  const producer = new Producer({ endpoints, namespace: '', topics: [ delayTopic ], logger: quiet });
  await startup(producer, 'delay producer');
  const at = new Date(Date.now() + 3000);
  const keep = await producer.send({ topic: delayTopic, body: Buffer.from('delay-keep'), deliveryTimestamp: at });
  const drop = await producer.send({ topic: delayTopic, body: Buffer.from('delay-recall'), deliveryTimestamp: at });
  check(typeof drop.recallHandle === 'string' && drop.recallHandle.length > 0, 'a delay message got no recall handle');
  const recalled = await producer.recallMessage(delayTopic, drop.recallHandle);
  check(recalled.messageId === drop.messageId, `recall answered message id ${recalled.messageId}, want ${drop.messageId}`);
  const consumer = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup: `${group}-delay`, logger: quiet,
    subscriptions: new Map([[ delayTopic, '*' ]]), awaitDuration: 5000,
  });
  await startup(consumer, 'delay consumer');
  result.delayDelivered = await receiveBodies(consumer, 1, () => {
    // Never before its time: the broker reads a timer slot once it has
    // passed, as RocketMQ does.
    check(Date.now() >= at.getTime(), `delay message delivered ${at.getTime() - Date.now()} ms early`);
  });
  check(keep.messageId.length > 0, 'delay message without id');
  await consumer.shutdown();
  await producer.shutdown();
}

// receiveBodies receives and acks until want messages came (or the
// deadline), calling seen at each, then receives once more without
// acking, and returns the bodies of all it got, sorted.
async function receiveBodies(consumer, want, seen) {
  const got = [];
  while (got.length < want && Date.now() < deadline) {
    for (const m of await consumer.receive(16, 15000)) {
      got.push(m.body.toString());
      seen(m);
      await consumer.ack(m);
    }
  }
  for (const m of await consumer.receive(16, 15000)) {
    got.push(m.body.toString());
  }
  return got.sort();
}

// compacted sends three messages of two keys to the compacted topic and
// receives what a new group gets: the newest message of each key.
async function compacted(result) {
  const producer = new Producer({ endpoints, namespace: '', topics: [ compactTopic ], logger: quiet });
  await startup(producer, 'compaction producer');
  for (const [ key, value ] of [ [ 'k1', 'v1' ], [ 'k2', 'v1' ], [ 'k1', 'v2' ] ]) {
    await producer.send({ topic: compactTopic, keys: [ key ], body: Buffer.from(`${key}=${value}`) });
  }
  await producer.shutdown();
  const consumer = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup: `${group}-compact`, logger: quiet,
    subscriptions: new Map([[ compactTopic, '*' ]]), awaitDuration: 3000,
  });
  await startup(consumer, 'compaction consumer');
  result.compactDelivered = await receiveBodies(consumer, 2, () => {});
  await consumer.shutdown();
}

(async () => {
  const result = { sent: 0, sentOther: 0, ids: [], putBack: 0, cameBack: 0, redelivered: 0, simpleAcked: 0,
    leftover: -1, pushConsumed: 0, pushRetried: 0, sentFifo: 0, refused: '',
    txnDelivered: [], txnChecked: [], delayDelivered: [], compactDelivered: [] };
  try {
    await produce(result);
    await consumeSimple(result);
    await consumePush(result);
    await transactions(result);
    await delays(result);
    await compacted(result);
  } catch (e) {
    failures.push(String(e && e.stack || e));
  }
  delete result.ids;
  result.failures = failures;
  console.log('RESULT ' + JSON.stringify(result));
  process.exit(failures.length === 0 ? 0 : 1);
})();
