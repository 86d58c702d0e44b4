#!/usr/bin/env node
// Plays one whole Bergen match over gRPC from Node.js, knowing nothing but the .proto.
//
//   node play_match.js HOST:PORT [SEATS] [--partnerships] [--seed N]
//                      [--ca FILE [--client-cert FILE --client-key FILE]]
//
// Creates a match, takes every seat (keeping each seat token, sent as
// "authorization: Bearer <token>"), plays random legal plays until the match ends, watches
// it as a spectator the whole time, then checks GetReplay and GetRecord against the final
// view, and GetAuditLog's timestamps. Prints a one-line JSON summary on stdout and exits 0,
// or prints the error on stderr and exits 1.
//
// With --ca it speaks TLS, trusting only the CA certificates of that PEM file; with
// --client-cert and --client-key too, it presents that certificate (mutual TLS).
//
// Loader options: keepCase false (fields are camelCase: matchId, legalPlays, viewerSeat...),
// enums as names, 64-bit integers as decimal strings, defaults on, oneofs on. With those,
// an absent proto3 `optional` scalar (turn, viewerSeat, winnerSide) is `undefined` and an
// absent message field (ends, result, mustPlay) is `null`; a present 0 stays 0. Enums are
// sent and read by their names (PRESET_STANDARD, MATCH_END_REASON_TARGET...).
'use strict';

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO = path.join(__dirname, '..', '..', '..', 'proto', 'bergen', 'v1', 'bergen.proto');
const CALL_DEADLINE_MS = 15000;
const WATCH_END_TIMEOUT_MS = 15000;
const MAX_PLAYS = 5000;

class CheckFailed extends Error {}

function check(cond, message) {
  if (!cond) throw new CheckFailed(message);
}

function parseArgs(argv) {
  const args = {
    address: null, seats: 2, partnerships: false, seed: null, ca: null, clientCert: null, clientKey: null,
  };
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--partnerships') args.partnerships = true;
    else if (a === '--seed') args.seed = Number(argv[++i]);
    else if (a === '--ca') args.ca = argv[++i];
    else if (a === '--client-cert') args.clientCert = argv[++i];
    else if (a === '--client-key') args.clientKey = argv[++i];
    else if (a.startsWith('--')) throw new CheckFailed(`unknown option ${a}`);
    else positional.push(a);
  }
  if (positional.length < 1 || positional.length > 2) {
    throw new CheckFailed(
      'usage: play_match.js HOST:PORT [SEATS] [--partnerships] [--seed N] '
        + '[--ca FILE [--client-cert FILE --client-key FILE]]',
    );
  }
  args.address = positional[0];
  if (positional.length === 2) args.seats = Number(positional[1]);
  check(Number.isInteger(args.seats) && args.seats >= 2 && args.seats <= 4, 'SEATS must be 2, 3 or 4');
  if (args.seed === null) args.seed = Math.floor(Math.random() * 2 ** 31);
  check(Number.isInteger(args.seed), '--seed must be an integer');
  check((args.clientCert === null) === (args.clientKey === null), '--client-cert and --client-key go together');
  check(args.clientCert === null || args.ca !== null, '--client-cert needs --ca');
  return args;
}

// A small seeded generator (mulberry32), so a failing run can be repeated with --seed.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function loadService() {
  const definition = protoLoader.loadSync(PROTO, {
    keepCase: false,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(definition);
  return pkg.bergen.v1.BergenService;
}

// Plaintext, or TLS trusting only the given CA (and presenting a client certificate).
function credentials(args) {
  if (args.ca === null) return grpc.credentials.createInsecure();
  const read = (file) => (file === null ? null : fs.readFileSync(file));
  return grpc.credentials.createSsl(read(args.ca), read(args.clientKey), read(args.clientCert));
}

function bearer(token) {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${token}`);
  return md;
}

function deadline() {
  return new Date(Date.now() + CALL_DEADLINE_MS);
}

// Promise wrapper for a unary call, with a deadline and optional metadata.
function unary(client, method, request, metadata) {
  return new Promise((resolve, reject) => {
    const cb = (err, response) => {
      if (err) {
        err.message = `${method}: ${err.message}`;
        reject(err);
      } else {
        resolve(response);
      }
    };
    client[method](request, metadata || new grpc.Metadata(), { deadline: deadline() }, cb);
  });
}

function present(value) {
  return value !== undefined && value !== null;
}

// Opens WatchMatch without a token. Resolves once the stream ends with OK.
function watch(client, matchId) {
  const result = { view: null, events: [], done: null };
  result.done = new Promise((resolve, reject) => {
    const call = client.WatchMatch({ matchId, afterSeq: '0' });
    let resolveFirst;
    result.first = new Promise((r) => {
      resolveFirst = r;
    });
    call.on('data', (msg) => {
      if (msg.item === 'view') {
        if (result.view !== null || result.events.length > 0) {
          reject(new CheckFailed('WatchMatch sent a view that is not the first message'));
          call.cancel();
          return;
        }
        result.view = msg.view;
        resolveFirst();
      } else if (msg.item === 'event') {
        if (result.view === null) {
          reject(new CheckFailed('WatchMatch sent an event before its first view'));
          call.cancel();
          return;
        }
        result.events.push(msg.event);
      } else {
        reject(new CheckFailed(`WatchMatch sent a message with no item: ${JSON.stringify(msg)}`));
        call.cancel();
      }
    });
    call.on('error', (err) => {
      err.message = `WatchMatch: ${err.message}`;
      reject(err);
    });
    call.on('status', (status) => {
      if (status.code === grpc.status.OK) resolve(result);
    });
  });
  // Avoid an unhandled rejection before main() awaits it; main() still sees the error.
  result.done.catch(() => {});
  return result;
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new CheckFailed(`${what} did not happen within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// The values an enum field may take in a served message: its names but the zero one.
const REASONS = {
  pointsScored: ['POINTS_REASON_DOUBLE_HEADER', 'POINTS_REASON_TRIPLE_HEADER', 'POINTS_REASON_DOUBLE_BONUS',
    'POINTS_REASON_DOMINO', 'POINTS_REASON_BLOCKED'],
  handEnded: ['HAND_END_REASON_DOMINO', 'HAND_END_REASON_BLOCKED', 'HAND_END_REASON_MATCH_OVER'],
};

function sameList(a, b) {
  return JSON.stringify(a.map(Number)) === JSON.stringify(b.map(Number));
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const random = rng(args.seed);
  const BergenService = loadService();
  const client = new BergenService(args.address, credentials(args));

  const created = await unary(client, 'CreateMatch', {
    seats: args.seats,
    partnerships: args.partnerships,
    preset: 'PRESET_STANDARD',
    name: `node client ${args.seats} seats`,
  });
  const matchId = created.matchId;
  check(typeof matchId === 'string' && matchId.length > 0, 'CreateMatch returned no match id');
  check(/^[0-9a-f]{64}$/.test(created.commitment), `bad commitment ${created.commitment}`);
  check(present(created.rules) && created.rules.target > 0, 'CreateMatch returned no rules');
  const rules = created.rules;
  check(rules.preset === 'PRESET_STANDARD', `rules preset ${rules.preset}`);
  check(
    rules.lead === 'LEAD_LOWEST_DOUBLE' && rules.draw === 'DRAW_UNTIL_FITS' && rules.blocked === 'BLOCKED_GERMAN'
      && rules.endgameReduction === 'ENDGAME_REDUCTION_ON' && rules.matchEnd === 'MATCH_END_INSTANT',
    `the standard preset's rules are not its defaults: ${JSON.stringify(rules)}`,
  );

  // The spectator stream, opened before any seat is taken so it sees the whole match.
  const watcher = watch(client, matchId);
  await withTimeout(watcher.first, CALL_DEADLINE_MS, 'the first WatchMatch message');
  const watchStart = watcher.view;
  check(watchStart.matchId === matchId, 'WatchMatch view is for another match');
  check(watchStart.phase === 'PHASE_SEATING', `watch view phase ${watchStart.phase}`);
  check(watchStart.viewerSeat === undefined, 'a spectator view has viewer_seat set');
  check(watchStart.turn === undefined, 'turn is set before the match started');

  // Take every seat by number (seat 0 included: an explicit 0 must reach the server).
  const tokens = new Map();
  for (let seat = 0; seat < args.seats; seat++) {
    const joined = await unary(client, 'JoinMatch', {
      matchId,
      seat,
      name: `node-${seat}`,
      clientSeed: `node-seed-${args.seed}-${seat}`,
    });
    check(joined.seat === seat, `asked for seat ${seat}, got ${joined.seat}`);
    check(typeof joined.seatToken === 'string' && joined.seatToken.length >= 16, 'short seat token');
    check(present(joined.view), 'JoinMatch returned no view');
    check(joined.view.viewerSeat === seat, `JoinMatch view has viewer_seat ${joined.view.viewerSeat}`);
    tokens.set(seat, joined.seatToken);
  }

  // Play until the end: the spectator view says whose turn it is, that seat's view lists
  // its legal plays.
  let plays = 0;
  const getMatch = async (md) => (await unary(client, 'GetMatch', { matchId }, md)).view;
  let view = await getMatch();
  while (view.phase !== 'PHASE_ENDED') {
    check(view.phase === 'PHASE_PLAYING', `phase ${view.phase} after every seat joined`);
    check(view.turn !== undefined, `no turn while playing (version ${view.version})`);
    check(plays < MAX_PLAYS, `no end after ${MAX_PLAYS} plays`);
    const seat = view.turn;
    check(tokens.has(seat), `turn ${seat} is not a seat`);
    const md = bearer(tokens.get(seat));
    const mine = await getMatch(md);
    check(mine.viewerSeat === seat, `seat ${seat} view has viewer_seat ${mine.viewerSeat}`);
    check(mine.turn === seat, `seat ${seat} view says turn ${mine.turn}`);
    check(mine.myTiles.length > 0, `seat ${seat} has no tiles on its turn`);
    check(mine.legalPlays.length > 0, `seat ${seat} has no legal plays on its turn`);
    if (present(mine.mustPlay)) {
      const mp = mine.mustPlay;
      check(
        mine.legalPlays.every((lp) => lp.tile.low === mp.low && lp.tile.high === mp.high),
        'a legal play other than the tile the seat must play',
      );
    }
    const choice = mine.legalPlays[Math.floor(random() * mine.legalPlays.length)];
    const request = {
      matchId,
      tile: choice.tile,
      end: choice.end,
      expectedVersion: mine.version,
      commandId: `node-${matchId}-${plays}`,
    };
    const response = await unary(client, 'Play', request, md);
    check(!response.replayed, 'a first play came back as replayed');
    check(response.events.length > 0, 'Play returned no events');
    check(present(response.view) && response.view.viewerSeat === seat, 'Play view is not the seat\'s');
    check(BigInt(response.view.version) > BigInt(mine.version), 'Play did not advance the version');
    plays += 1;
    view = await getMatch();
  }

  // The end, as a spectator sees it.
  check(present(view.result), 'an ended match has no result');
  check(view.result.reason === 'MATCH_END_REASON_TARGET', `result reason ${view.result.reason}`);
  check(view.turn === undefined, `turn ${view.turn} is set after the end`);
  check(view.viewerSeat === undefined, 'a spectator view has viewer_seat set');
  check(sameList(view.result.scores, view.scores), 'result scores differ from the view scores');
  check(/^[0-9a-f]{64}$/.test(view.serverSeed), 'no server seed revealed after the end');
  check(view.revealedHands.length === args.seats, 'hands not revealed after the end');
  const finalScores = view.scores.map(Number);
  const finalVersion = BigInt(view.version);

  // The watcher: consecutive seq from just after its first view to the final version,
  // and a stream that ended by itself.
  const watched = await withTimeout(watcher.done, WATCH_END_TIMEOUT_MS, 'the end of WatchMatch');
  const seqs = watched.events.map((e) => BigInt(e.seq));
  check(seqs.length > 0, 'WatchMatch sent no event');
  let expected = BigInt(watchStart.version) + 1n;
  for (const s of seqs) {
    check(s === expected, `WatchMatch seq ${s} where ${expected} was expected`);
    expected += 1n;
  }
  check(seqs[seqs.length - 1] === finalVersion, `watch ended at seq ${seqs[seqs.length - 1]}, match at ${finalVersion}`);
  for (const e of watched.events) check(present(e.body), `event ${e.seq} has no body`);
  const ended = watched.events.find((e) => e.body === 'matchEnded');
  check(ended !== undefined, 'WatchMatch sent no match_ended event');
  check(sameList(ended.matchEnded.result.scores, finalScores), 'match_ended scores differ from the view');
  for (const e of watched.events) {
    const allowed = REASONS[e.body];
    if (allowed !== undefined) {
      check(allowed.includes(e[e.body].reason), `event ${e.seq}: ${e.body} reason ${e[e.body].reason}`);
    }
  }
  const handEnds = watched.events.filter((e) => e.body === 'handEnded').length;

  // The replay: whole, from seq 1 to the final version.
  const replay = await unary(client, 'GetReplay', { matchId, afterSeq: '0' });
  check(replay.complete, 'GetReplay of an ended match is not complete');
  check(replay.events.length === Number(finalVersion), `replay has ${replay.events.length} events, version ${finalVersion}`);
  replay.events.forEach((e, i) => check(BigInt(e.seq) === BigInt(i + 1), `replay seq ${e.seq} at ${i}`));

  // The record.
  const record = JSON.parse((await unary(client, 'GetRecord', { matchId })).recordJson);
  check(record.match_id === matchId, `record match_id ${record.match_id}`);
  check(sameList(record.result.scores, finalScores), `record scores ${JSON.stringify(record.result.scores)}`);
  check(record.server_seed === view.serverSeed, 'record server seed differs from the view');
  check(record.commitment === created.commitment, 'record commitment differs from CreateMatch');
  check(record.hands.length === handEnds, `record has ${record.hands.length} hands, ${handEnds} ended`);

  // The audit log of the ended match: every event, with when it was recorded (a Timestamp).
  const audit = await unary(client, 'GetAuditLog', { matchId });
  check(audit.events.length === Number(finalVersion), `audit log has ${audit.events.length} events`);
  let previous = 0n;
  for (const e of audit.events) {
    check(present(e.recordedAt), `audit event ${e.seq} has no recorded_at`);
    const at = BigInt(e.recordedAt.seconds) * 1000000000n + BigInt(e.recordedAt.nanos);
    check(at >= previous, `audit event ${e.seq} was recorded before the one before it`);
    previous = at;
  }
  const recordedMs = Number(previous / 1000000n);
  check(Math.abs(recordedMs - Date.now()) < 3600 * 1000, `the last event was recorded at ${recordedMs} ms`);

  client.close();
  const winner = view.result.winnerSide;
  process.stdout.write(
    JSON.stringify({
      match_id: matchId,
      seats: args.seats,
      partnerships: args.partnerships,
      seed: args.seed,
      plays,
      scores: finalScores,
      winner_side: winner === undefined ? null : winner,
      version: Number(finalVersion),
      events_watched: watched.events.length,
      first_watched_seq: Number(seqs[0]),
      hands: record.hands.length,
    }) + '\n',
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    const code = err && err.code !== undefined && !(err instanceof CheckFailed) ? ` (gRPC status ${err.code})` : '';
    process.stderr.write(`play_match failed${code}: ${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
  },
);
