// node-zookeeper-client driven over stdin for the client matrix: one command a line in, one
// answer a line out, "ok [detail]" or "err <EXCEPTION_NAME>". See clientmatrix/doc.go.
'use strict';
const readline = require('readline');
const zookeeper = require('node-zookeeper-client');

let client = null;
let lastEvent = 'none';
// An exception thrown on the client's socket handler would end the process; it is kept and
// reported by "state" instead, so the matrix can tell a dead client from a hung one.
let crashed = '';
// How long burst waits for its results (the matrix allows it a few seconds more).
const BURST_WAIT_MS = 8000;
process.on('uncaughtException', (e) => { crashed = String(e.message).replace(/\s+/g, '_'); });

function name(err) {
  if (err && typeof err.getName === 'function') return err.getName();
  return err && err.constructor ? err.constructor.name : String(err);
}

function mode(m) {
  if (m === 's') return zookeeper.CreateMode.PERSISTENT_SEQUENTIAL;
  if (m === 'e') return zookeeper.CreateMode.EPHEMERAL;
  return zookeeper.CreateMode.PERSISTENT;
}

function handle(a, reply) {
  switch (a[0]) {
    case 'connect': {
      client = zookeeper.createClient(a[1], { sessionTimeout: Number(a[2]), spinDelay: 200, retries: 2 });
      client.on('state', (s) => { lastEvent = s.getName(); });
      const timer = setTimeout(() => reply('err NotConnected'), 8000);
      client.once('connected', () => {
        clearTimeout(timer);
        reply('ok ' + client.getSessionId().toString('hex') + ' ' + client.getSessionPassword().toString('hex'));
      });
      client.connect();
      return;
    }
    case 'create':
      client.create(a[1], Buffer.alloc(Number(a[2])), zookeeper.ACL.OPEN_ACL_UNSAFE, mode(a[3]),
        (err, p) => reply(err ? 'err ' + name(err) : 'ok ' + p));
      return;
    case 'get':
      client.getData(a[1], (err, data) => reply(err ? 'err ' + name(err) : 'ok ' + (data ? data.length : 0)));
      return;
    case 'children':
      client.getChildren(a[1], (err, c) => reply(err ? 'err ' + name(err) : 'ok ' + c.length));
      return;
    case 'addauth':
      client.addAuthInfo(a[1], Buffer.from(a[2]));
      reply('ok');
      return;
    case 'probe': {
      let fired = false;
      let created = false;
      const timer = setTimeout(() => reply('err WatchNotDelivered'), 10000);
      const done = () => {
        if (!fired || !created) return;
        clearTimeout(timer);
        client.remove(a[1], -1, (err) => reply(err ? 'err ' + name(err) : 'ok'));
      };
      client.exists(a[1], () => { fired = true; done(); }, (err) => {
        if (err) { clearTimeout(timer); reply('err ' + name(err)); return; }
        client.create(a[1], Buffer.alloc(0), zookeeper.ACL.OPEN_ACL_UNSAFE, zookeeper.CreateMode.EPHEMERAL, (err2) => {
          if (err2) { clearTimeout(timer); reply('err ' + name(err2)); return; }
          created = true;
          done();
        });
      });
      return;
    }
    case 'burst': {
      // Wait for every result up to one deadline, then classify: answered, failed (by error
      // name), or not completed yet (held by the client until it reconnects).
      const n = Number(a[2]);
      let ok = 0;
      let failed = 0;
      let pending = n;
      const errs = new Set();
      const answer = () => {
        clearTimeout(timer);
        reply('ok ' + ok + ' ' + failed + ' ' + pending + ' ' + ([...errs].sort().join(',') || '-'));
      };
      const timer = setTimeout(answer, BURST_WAIT_MS);
      for (let i = 0; i < n; i++) {
        client.create(a[1] + '/n' + i + '-', Buffer.alloc(0), zookeeper.ACL.OPEN_ACL_UNSAFE,
          zookeeper.CreateMode.PERSISTENT_SEQUENTIAL, (err) => {
            if (err) { failed++; errs.add(name(err)); } else ok++;
            if (--pending === 0) answer();
          });
      }
      return;
    }
    case 'state':
      reply('ok ' + client.getState().getName() + ' ' + lastEvent + (crashed ? ' crashed=' + crashed : ''));
      return;
    case 'close':
      client.close();
      reply('ok');
      return;
    default:
      reply('err UnknownCommand');
  }
}

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const a = line.trim().split(' ');
  let answered = false;
  const reply = (s) => { if (!answered) { answered = true; process.stdout.write(s + '\n'); } };
  try {
    handle(a, reply);
  } catch (e) {
    reply('err ' + name(e));
  }
});
rl.on('close', () => process.exit(0));
process.stdout.write('ready\n');
