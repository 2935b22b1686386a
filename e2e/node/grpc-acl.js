'use strict';
// RocketMQ 5's Node.js client signs its gRPC calls (sessionCredentials):
// through a proxy with ACL 2.0 on, a user allowed to publish to and
// consume TOPIC as GROUP does both; a wrong secret is refused. Driven by
// TestNodeGRPCWithACL (e2e/grpc_test.go).
//
// Environment: ENDPOINT, TOPIC, GROUP, ACCESS_KEY, SECRET_KEY, COUNT,
// TIMEOUT_MS. Prints "RESULT {...}"; exits 0 when every check held.
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const endpoints = process.env.ENDPOINT;
const topic = process.env.TOPIC;
const group = process.env.GROUP;
const count = Number(process.env.COUNT || 5);
const deadline = Date.now() + Number(process.env.TIMEOUT_MS || 60000);
const credentials = { accessKey: process.env.ACCESS_KEY, accessSecret: process.env.SECRET_KEY };
const quiet = { info() {}, warn() {}, debug() {}, error() {}, close() {} };

(async () => {
  const result = { sent: 0, received: 0, wrongSecret: '' };
  const failures = [];
  try {
    const producer = new Producer({ endpoints, namespace: '', topics: [ topic ], sessionCredentials: credentials, logger: quiet });
    await producer.startup();
    for (let i = 0; i < count; i++) {
      await producer.send({ topic, tag: 'TagAcl', body: Buffer.from(`acl-${i}`) });
      result.sent++;
    }
    await producer.shutdown();

    const consumer = new SimpleConsumer({
      endpoints, namespace: '', consumerGroup: group, sessionCredentials: credentials, logger: quiet,
      subscriptions: new Map([[ topic, '*' ]]), awaitDuration: 5000,
    });
    await consumer.startup();
    const got = new Set();
    while (got.size < count && Date.now() < deadline) {
      for (const m of await consumer.receive(16, 15000)) {
        got.add(m.body.toString());
        await consumer.ack(m);
      }
    }
    result.received = got.size;
    await consumer.shutdown();

    const intruder = new Producer({ endpoints, namespace: '', topics: [ topic ], logger: quiet,
      sessionCredentials: { accessKey: credentials.accessKey, accessSecret: 'wrong-secret' } });
    try {
      await intruder.startup();
      await intruder.send({ topic, body: Buffer.from('intruder') });
      failures.push('a producer with a wrong secret sent a message');
    } catch (e) {
      // The startup error wraps the route query's: every message of the chain.
      const chain = [];
      for (let c = e; c && chain.length < 5; c = c.cause) {
        chain.push(String(c.message || c));
      }
      result.wrongSecret = chain.join(' <- ');
    }
    await intruder.shutdown().catch(() => {});
  } catch (e) {
    failures.push(String(e && e.stack || e));
  }
  result.failures = failures;
  console.log('RESULT ' + JSON.stringify(result));
  process.exit(failures.length === 0 ? 0 : 1);
})();
