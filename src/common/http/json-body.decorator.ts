import { Reflector } from '@nestjs/core';
import type { JsonBodyOptions } from './json-body';

/** Marks a route whose JSON body is parsed after the guards, with its own size cap. */
export const JsonBody = Reflector.createDecorator<JsonBodyOptions>();

export const KiB = 1024;
export const MiB = 1024 * 1024;
