import { BadRequestException } from '@nestjs/common';

/** Run and campaign ids as the ledger issues them; anything else is refused before any store is read. */
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function checkId(what: 'run' | 'campaign', id: string): string {
  if (!ID.test(id)) throw new BadRequestException(`not a ${what} id: ${JSON.stringify(id.slice(0, 140))}`);
  return id;
}
