#!/usr/bin/env node
import 'reflect-metadata';
import { ownValue } from '../common/own-key';
import { NestFactory } from '@nestjs/core';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { createLogger } from '../common/logging/logger';
import { GatewayError } from '../common/errors/gateway-error';
import { AppConfig, readAppConfig, readGatewayFile } from '../config/app-config';
import { PERMISSIONS, Permission } from '../config/gateway-config.schema';
import { ConfigError } from '../config/schema';
import { serve } from '../serve';
import { RetentionService } from '../retention/retention.service';
import { TenancyService } from '../tenancy/tenancy.service';
import { CliModule } from './cli.module';
import { addExportCommand } from './export.command';
import { addPruneCommand } from './prune.command';

/**
 * The `gateway` command (README "CLI"): serve, migrate, config check, organisation/key admin, prune, and
 * export (README "Decisions export").
 * Exit codes: 0 done, 1 failed (one line on stderr, no stack trace), 2 usage error.
 */
class CliFailure extends Error {}

function permissionsArg(value: string): Permission[] {
  const list = value.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = list.find((p) => !(PERMISSIONS as readonly string[]).includes(p));
  if (bad || list.length === 0) throw new InvalidArgumentError(`permissions are a comma list of ${PERMISSIONS.join(', ')}`);
  return [...new Set(list)] as Permission[];
}

/** Runs `fn` with the stores, tenancy and retention of the configured deployment, then closes them. */
async function withContext<T>(fn: (ctx: { tenancy: TenancyService; retention: RetentionService; config: AppConfig }) => Promise<T>): Promise<T> {
  const config = readAppConfig();
  const logger = { pino: createLogger(config.env.logLevel === 'info' ? 'warn' : config.env.logLevel) };
  const ctx = await NestFactory.createApplicationContext(CliModule.forRoot(config, logger), { logger: false, abortOnError: false });
  try {
    return await fn({ tenancy: ctx.get(TenancyService), retention: ctx.get(RetentionService), config });
  } finally {
    await ctx.close();
  }
}

export function buildCli(out: (s: string) => void = (s) => process.stdout.write(s)): Command {
  const program = new Command('gateway').description('Routing gateway: server and administration').exitOverride();

  program
    .command('serve')
    .description('start the HTTP server (same as npm start)')
    .action(async () => serve(readAppConfig()));

  program
    .command('migrate')
    .description('apply pending analytics-store migrations, upsert the organisations and keys of GATEWAY_CONFIG, and exit')
    .action(async () =>
      withContext(async ({ tenancy, config }) => {
        // What start-up does before serving: without it, `keys create --org` for a configured
        // organisation fails until a server has started once. The demo organisation stays a server affair.
        await tenancy.seed(config.gateway, { demo: false });
        const orgs = Object.keys(config.gateway.organizations).length;
        out(`migrations are up to date (${config.env.databaseUrl ? 'postgres' : 'embedded pglite'}); ${orgs} configured organizations upserted\n`);
      }),
    );

  program
    .command('config')
    .description('configuration tools')
    .command('check')
    .argument('<file>', 'gateway.yaml to validate')
    .description('validate a gateway file (with ${VAR} expansion from the environment)')
    .action(async (file: string) => {
      const cfg = readGatewayFile(file);
      out(
        `${file}: OK (${Object.keys(cfg.providers).length} providers, ${Object.keys(cfg.models).length} models, ` +
          `${cfg.routes.length} routes, ${Object.keys(cfg.organizations).length} organizations)\n`,
      );
    });

  const keys = program.command('keys').description('API keys');
  keys
    .command('create')
    .description('issue an API key for an organisation; the key is printed once')
    .requiredOption('--org <org>', 'organisation id')
    .option('--permissions <list>', 'comma list of read,write,admin (admin: the /v1/admin API)', permissionsArg, ['read', 'write'] as Permission[])
    .option('--id <id>', 'key id (default: generated)')
    .action(async (opts: { org: string; permissions: Permission[]; id?: string }) =>
      withContext(async ({ tenancy, config }) => {
        if (ownValue(config.gateway.organizations, opts.org) && !(await tenancy.listOrgs()).some((o) => o.id === opts.org)) {
          throw new CliFailure(`organisation "${opts.org}" is in the config but not yet in the database: run "gateway migrate" (or start the server) first`);
        }
        const { id, key } = await tenancy.createKey(opts.org, opts.permissions, opts.id);
        out(`key id: ${id}\napi key (shown once): ${key}\n`);
      }),
    );
  keys
    .command('revoke')
    .argument('<id>', 'key id')
    .description('revoke an API key')
    .action(async (id: string) =>
      withContext(async ({ tenancy }) => {
        if (!(await tenancy.revokeKey(id))) throw new CliFailure(`no active key with id "${id}"`);
        out(`revoked ${id}\n`);
      }),
    );

  program
    .command('orgs')
    .description('organisations')
    .command('list')
    .description('list organisations with plan, features and active key count')
    .action(async () =>
      withContext(async ({ tenancy }) => {
        const orgs = await tenancy.listOrgs();
        out('id\tplan\tfeatures\tmonthly_limit\tkill_switches\tactive_keys\tsource\n');
        for (const o of orgs) {
          out(`${o.id}\t${o.plan}\t${o.features.join(',') || '-'}\t${o.monthlyRequestLimit ?? 'unlimited'}\t${o.killSwitches.join(',') || '-'}\t${o.activeKeys}\t${o.source}\n`);
        }
      }),
    );
  addPruneCommand(program, out, withContext, (message) => new CliFailure(message));
  addExportCommand(program, out, (message) => new CliFailure(message));
  return program;
}

export async function runCli(argv: string[]): Promise<number> {
  try {
    await buildCli().parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    const message =
      err instanceof ConfigError
        ? `config error: ${err.message}`
        : err instanceof CliFailure || err instanceof GatewayError
          ? err.message
          : `failed: ${(err as Error).message}`;
    process.stderr.write(`gateway: ${message}\n`);
    return 1;
  }
}

if (require.main === module) {
  // `serve` keeps running; every other command exits when done.
  const argv = process.argv.slice(2);
  runCli(argv).then((code) => {
    if (code !== 0 || argv[0] !== 'serve') process.exit(code);
  });
}
