import { Injectable } from '@nestjs/common';
import type { TableData } from './table-schemas.js';

/** The user projections' tables as the HTTP side serves them (filled in with the user projections). */
@Injectable()
export class UserProjectionTables {
  async tables(): Promise<TableData[]> {
    return [];
  }
}
