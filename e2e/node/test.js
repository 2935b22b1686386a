'use strict';

// Produces COUNT messages with ali-ons against a rocketkv name server and
// broker, then consumes them with an ali-ons push consumer (clustering,
// from the first offset) and checks that every body arrived with its tag.
// Driven by TestNodeAliOns (e2e/node_test.go), which starts the binaries
// and passes their addresses in the environment:
//
//   NAMESRV_ADDR  name server host:port (required)
//   TOPIC         topic to use (default NodeAliOns)
//   GROUP_PREFIX  prefix of the producer and consumer groups (default node)
//   COUNT         messages to send (default 20)
//   TIMEOUT_MS    time allowed for the whole run (default 90000)
//
// Prints one line per phase and, on success, "RESULT {json}" with what
// happened, then exits 0; on any failure prints "FAIL <reason>" and exits 1.

const util = require('util');
const { Producer, Consumer, Message } = require('ali-ons');

const nameSrv = process.env.NAMESRV_ADDR;
const topic = process.env.TOPIC || 'NodeAliOns';
const groupPrefix = process.env.GROUP_PREFIX || 'node';
const count = Number(process.env.COUNT || 20);
const timeoutMs = Number(process.env.TIMEOUT_MS || 90000);
const tag = 'TagNode';

function fail(reason) {
  console.log('FAIL ' + reason);
  process.exit(1);
}

if (!nameSrv) {
  fail('NAMESRV_ADDR is not set');
}

const timer = setTimeout(() => fail(`timed out after ${timeoutMs} ms`), timeoutMs);

// ali-ons asserts an HTTP client for its "onsAddr" name server lookup even
// when nameSrv is given (then it never calls it).
const httpclient = {
  async request() {
    throw new Error('no HTTP lookups: nameSrv is set');
  },
};

// Quiet loggers: ali-ons logs a lot at info level.
const logger = {
  debug() {},
  info() {},
  warn(...args) { console.error('[ali-ons warn] ' + util.format(...args)); },
  error(...args) { console.error('[ali-ons error] ' + util.format(...args)); },
};

const common = {
  httpclient,
  nameSrv,
  logger,
  // Any strings: rocketkv does not check ACL signatures.
  accessKeyId: 'rocketkv-ak',
  accessKeySecret: 'rocketkv-sk',
};

async function produce() {
  const producer = new Producer(Object.assign({}, common, {
    producerGroup: `${groupPrefix}-pg`,
  }));
  producer.on('error', err => console.error('[producer error]', err));
  await producer.ready();
  const sent = [];
  for (let i = 0; i < count; i++) {
    const msg = new Message(topic, tag, `node-${i}`);
    msg.keys = [ `key-${i}` ];
    const res = await producer.send(msg);
    if (res.sendStatus !== 'SEND_OK') {
      throw new Error(`send ${i}: status ${res.sendStatus}`);
    }
    if (!res.msgId || !res.messageQueue || res.messageQueue.topic !== topic) {
      throw new Error(`send ${i}: unexpected result ${JSON.stringify(res)}`);
    }
    sent.push({ msgId: res.msgId, queueId: res.messageQueue.queueId, queueOffset: res.queueOffset });
  }
  await producer.close();
  return sent;
}

async function consume() {
  const consumer = new Consumer(Object.assign({}, common, {
    consumerGroup: `${groupPrefix}-cg`,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    // The default re-balances every 10 s; the first one runs at start.
    rebalanceInterval: 2000,
  }));
  consumer.on('error', err => console.error('[consumer error]', err));
  const got = new Map();
  let badTag = null;
  let allReceived;
  const done = new Promise(resolve => { allReceived = resolve; });
  consumer.subscribe(topic, '*', async msg => {
    const body = msg.body.toString();
    if (msg.tags !== tag) {
      badTag = `${body} arrived with tag ${JSON.stringify(msg.tags)}`;
    }
    got.set(body, (got.get(body) || 0) + 1);
    if (got.size === count) {
      allReceived();
    }
  });
  await consumer.ready();
  await done;
  // The last handler has returned only when the process queues are empty
  // (ali-ons acknowledges after the handler): then close, which commits
  // the offsets.
  while ([ ...consumer.processQueueTable.values() ].some(item => item.processQueue.msgCount > 0)) {
    await new Promise(resolve => setTimeout(resolve, 10));
  }
  await consumer.close();
  if (badTag) {
    throw new Error(badTag);
  }
  let redelivered = 0;
  for (const n of got.values()) {
    redelivered += n - 1;
  }
  return { distinct: got.size, redelivered };
}

(async () => {
  const sent = await produce();
  console.log(`SENT ${sent.length}`);
  const queues = new Set(sent.map(s => s.queueId));
  const consumed = await consume();
  console.log(`CONSUMED ${consumed.distinct}`);
  clearTimeout(timer);
  console.log('RESULT ' + JSON.stringify({
    sent: sent.length,
    queues: queues.size,
    consumed: consumed.distinct,
    redelivered: consumed.redelivered,
  }));
  process.exit(0);
})().catch(err => fail(err && err.stack ? err.stack.replace(/\n/g, ' | ') : String(err)));
