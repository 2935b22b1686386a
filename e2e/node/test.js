'use strict';

// Produces and consumes with ali-ons against a rocketkv name server and
// broker. Driven by TestNodeAliOns (e2e/node_test.go), which starts the
// binaries, creates the topic and passes the addresses in the environment:
//
//   NAMESRV_ADDR  name server host:port (required)
//   TOPIC         topic to use (default NodeAliOns)
//   GROUP_PREFIX  prefix of the producer and consumer groups (default node)
//   COUNT         messages to send with the tag TagNode (default 20)
//   TIMEOUT_MS    time allowed for the whole run (default 90000)
//
// 1. A producer sends COUNT messages tagged TagNode and COUNT/2 tagged
//    TagOther (SEND_MESSAGE_V2); every send must answer SEND_OK.
// 2. A push consumer (clustering, from the first offset) subscribes to
//    TagNode only. It asks for a retry (ACTION_RETRY, i.e.
//    CONSUMER_SEND_MSG_BACK) at the first delivery of every fifth message;
//    the broker must deliver those again through the group's retry topic.
//    Every TagNode body must then have been consumed, no TagOther body,
//    and no send-back may have failed.
//
// Prints one line per phase and, on success, "RESULT {json}", then exits
// 0; on any failure prints "FAIL <reason>" and exits 1.

const util = require('util');
const { Producer, Consumer, Message } = require('ali-ons');

const nameSrv = process.env.NAMESRV_ADDR;
const topic = process.env.TOPIC || 'NodeAliOns';
const groupPrefix = process.env.GROUP_PREFIX || 'node';
const count = Number(process.env.COUNT || 20);
const timeoutMs = Number(process.env.TIMEOUT_MS || 90000);
const tag = 'TagNode';
const otherTag = 'TagOther';

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
  // ali-ons signs every request with these (ACL 1.0); a broker without
  // aclEnable ignores the signature, TestNodeAliOnsWithACL's checks it.
  accessKeyId: 'rocketkv-ak',
  accessKeySecret: 'rocketkv-sk',
};

async function produce() {
  const producer = new Producer(Object.assign({}, common, {
    producerGroup: `${groupPrefix}-pg`,
    // ali-ons shares one client (connections, routes) between the producers
    // and consumers of a client id (ip@instanceName, the pid by default):
    // with distinct names, closing the producer cannot close a connection
    // the consumer is about to use.
    instanceName: `${groupPrefix}-producer-${process.pid}`,
  }));
  producer.on('error', err => console.error('[producer error]', err));
  await producer.ready();
  const sent = [];
  const send = async (tags, body, key) => {
    const msg = new Message(topic, tags, body);
    msg.keys = [ key ];
    const res = await producer.send(msg);
    if (res.sendStatus !== 'SEND_OK') {
      throw new Error(`send ${body}: status ${res.sendStatus}`);
    }
    if (!res.msgId || !res.messageQueue || res.messageQueue.topic !== topic) {
      throw new Error(`send ${body}: unexpected result ${JSON.stringify(res)}`);
    }
    sent.push({ body, tags, msgId: res.msgId, queueId: res.messageQueue.queueId, queueOffset: res.queueOffset });
  };
  for (let i = 0; i < count; i++) {
    await send(tag, `node-${i}`, `key-${i}`);
    if (i % 2 === 0) {
      await send(otherTag, `other-${i / 2}`, `other-key-${i / 2}`);
    }
  }
  await producer.close();
  return sent;
}

// shouldRetry tells which bodies the consumer asks to get again.
function shouldRetry(body) {
  return Number(body.slice(body.indexOf('-') + 1)) % 5 === 0;
}

async function consume() {
  const consumer = new Consumer(Object.assign({}, common, {
    consumerGroup: `${groupPrefix}-cg`,
    instanceName: `${groupPrefix}-consumer-${process.pid}`,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    // The defaults re-balance every 10 s and refresh routes every 30 s: the
    // group's retry topic, created by the broker at the first heartbeat,
    // would be found late.
    rebalanceInterval: 1000,
    pollNameServerInteval: 1000,
  }));
  const errors = [];
  consumer.on('error', err => {
    // The group's retry topic has no route until the broker created it at
    // the first heartbeat (TOPIC_NOT_EXIST, 17): expected at start.
    if (err && err.code === 17 && /%RETRY%/.test(err.message)) {
      return;
    }
    // ali-ons answers a request that outlives its fixed 3 s timeout
    // (heartbeat, consumer list) by closing the channel, which fails the
    // requests pending on it; it reconnects and retries on its own. On a
    // CI machine running every e2e test at once that happens without any
    // broker fault, so it is reported but not counted: what this test
    // checks is that every message arrives and offsets are committed.
    if (err && (err.name === 'ResponseTimeoutError' || /The socket was closed/.test(err.message))) {
      console.warn('[consumer transient]', String(err.message || err));
      return;
    }
    console.error('[consumer error]', err);
    errors.push(String(err && err.message || err));
  });
  const deliveries = new Map(); // body -> reconsumeTimes of each delivery
  const consumed = new Set(); // bodies consumed successfully
  let wrong = null;
  let allConsumed;
  const done = new Promise(resolve => { allConsumed = resolve; });
  consumer.subscribe(topic, tag, async msg => {
    const body = msg.body.toString();
    if (msg.tags !== tag || msg.topic !== topic) {
      wrong = `${body} arrived with tag ${JSON.stringify(msg.tags)} on topic ${msg.topic}`;
    }
    if (!deliveries.has(body)) {
      deliveries.set(body, []);
    }
    deliveries.get(body).push(msg.reconsumeTimes);
    if (shouldRetry(body) && msg.reconsumeTimes === 0) {
      return Consumer.ACTION_RETRY;
    }
    consumed.add(body);
    if (consumed.size === count) {
      allConsumed();
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
  if (wrong) {
    throw new Error(wrong);
  }
  if (errors.length) {
    throw new Error(`consumer errors: ${errors.join('; ')}`);
  }
  let retried = 0;
  let redelivered = 0;
  for (const [ body, times ] of deliveries) {
    if (shouldRetry(body)) {
      if (times.length < 2 || times[0] !== 0 || times[1] !== 1) {
        throw new Error(`${body} was delivered with reconsumeTimes ${JSON.stringify(times)}, want [0,1]`);
      }
      retried++;
      redelivered += times.length - 2;
    } else {
      redelivered += times.length - 1;
    }
  }
  return { distinct: consumed.size, retried, redelivered };
}

(async () => {
  const sent = await produce();
  console.log(`SENT ${sent.length}`);
  const queues = new Set(sent.map(s => s.queueId));
  const consumed = await consume();
  console.log(`CONSUMED ${consumed.distinct}`);
  clearTimeout(timer);
  // Per queue, the offset after its last TagNode message: the group's
  // committed offset must have reached it (ali-ons commits the offset
  // after the last consumed message; TagOther messages behind it are
  // skipped by the broker and committed only by a later pull).
  const consumedUpTo = {};
  for (const s of sent) {
    if (s.tags === tag) {
      consumedUpTo[s.queueId] = Math.max(consumedUpTo[s.queueId] || 0, Number(s.queueOffset) + 1);
    }
  }
  console.log('RESULT ' + JSON.stringify({
    consumedUpTo,
    sent: sent.filter(s => s.tags === tag).length,
    sentOther: sent.filter(s => s.tags === otherTag).length,
    queues: queues.size,
    consumed: consumed.distinct,
    retried: consumed.retried,
    redelivered: consumed.redelivered,
  }));
  process.exit(0);
})().catch(err => fail(err && err.stack ? err.stack.replace(/\n/g, ' | ') : String(err)));
